"""The source distribution carries everything the C++ extension's build reads.

``python -m build`` (and ``pip`` given an sdist) builds the wheel from the sdist, not from the
clone: a header missing from it fails the build on the user's machine. setup.py lists only the
``.cpp`` sources; MANIFEST.in adds the headers and the per-instruction-set kernel source.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")


def _included(path: str) -> set:
    """Files named by ``#include "..."`` in one C++ source."""
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M))


_BUILT = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")


def _source_copy(tmp_path):
    """A copy of the files a build starts from (the clone without tests and build products)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md"):
        if os.path.exists(os.path.join(ROOT, name)):  # a missing MANIFEST.in must fail below
            shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(CSRC, src / "csrc")
    shutil.copytree(os.path.join(ROOT, "medmnistc_fast"), src / "medmnistc_fast", ignore=_BUILT)
    return src


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "setup.py")),
                    reason="needs the source tree (setup.py)")
def test_wheel_python_part_holds_every_package_file_without_warnings(tmp_path):
    # build_py lays out what the wheel carries besides the extension: every file of the package
    # folder (modules, stubs, py.typed, the ink set in assets/), and setuptools must not warn
    # that a folder of it is missing from the packages configuration (77+ says that "may become
    # an error")
    src = _source_copy(tmp_path)
    run = subprocess.run([sys.executable, "setup.py", "build_py", "--build-lib", "lib"],
                         cwd=src, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "absent from the `packages` configuration" not in run.stderr + run.stdout
    pkg = src / "medmnistc_fast"
    files = {p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file()}
    built = {p.relative_to(src / "lib" / "medmnistc_fast").as_posix()
             for p in (src / "lib" / "medmnistc_fast").rglob("*") if p.is_file()}
    assert {"assets/inks.npz", "assets/NOTICE", "py.typed", "_native.pyi"} <= files
    assert sorted(files - built) == []


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "setup.py")),
                    reason="needs the source tree (setup.py)")
def test_sdist_holds_every_file_the_extension_build_reads(tmp_path):
    src = _source_copy(tmp_path)
    run = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", "dist"],
                         cwd=src, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (archive,) = (src / "dist").iterdir()
    with tarfile.open(archive) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    # what the build reads: every .cpp (setup.py's sources) and, transitively, their includes
    needed = {f"csrc/{n}" for n in os.listdir(CSRC) if n.endswith(".cpp")}
    todo = sorted(needed)
    while todo:
        for inc in _included(os.path.join(ROOT, todo.pop())):
            rel = f"csrc/{inc}"
            if os.path.exists(os.path.join(ROOT, rel)) and rel not in needed:
                needed.add(rel)
                todo.append(rel)
    assert {"csrc/kernel_common.hpp", "csrc/hsv_lanes.inc"} <= needed  # the scan found them
    assert sorted(needed - names) == []
