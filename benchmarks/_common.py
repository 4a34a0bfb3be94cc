"""Pieces shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""
import argparse
import json
import os
import importlib.util
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def add_reference_arg(ap: argparse.ArgumentParser, needed: bool = False) -> None:
    """``--reference-python``: the python of a venv with medmnistc 0.1.0 (default the
    environment variable ``MEDMNISTC_REFERENCE_PYTHON``); optional unless ``needed`` (the
    script then checks that one of the two was given)."""
    what = ("needed: the script compares against it" if needed
            else "the reference is skipped if not given")
    ap.add_argument("--reference-python", default=os.environ.get("MEDMNISTC_REFERENCE_PYTHON"),
                    help=f"python of a venv with medmnistc 0.1.0 (default: the environment "
                         f"variable MEDMNISTC_REFERENCE_PYTHON; {what})")


def require_reference(script: str, modules) -> None:
    """Exit with a message naming the missing modules unless every top-level module in
    ``modules`` is importable: for the scripts that run inside the reference's own venv
    (``medmnistc`` 0.1.0 and the libraries it calls), started by hand with another python."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"{script} runs only in the reference's venv (medmnistc 0.1.0 and the libraries "
                 f"its run needs): {sys.executable} cannot import {', '.join(missing)}. Run it "
                 f"as REF/bin/python {script} in a venv that has them (see "
                 "../shared/spec/medmnistc.md, \"How to run the reference here\").")


#: glibc malloc settings for the reference's processes: never return freed memory to the OS and
#: serve blocks up to 32 MB (glibc's largest allowed threshold) from the heap, as the heap of a
#: long-running process ends up doing. Without them the reference's cost for corruptions that
#: allocate large float arrays (defocus, saturate) depends on where its heap top happens to sit:
#: measured in session 10, pathmnist's defocus took 3.9-4.4 ms in some processes and 1.9-2.2 ms
#: in others, the slow ones with 675,000 more page faults per run (memory given back to the OS
#: and faulted in again on every call). With them the reference runs at its faster setting, so
#: the speed-ups are the conservative ones. Our side needs none (no page faults per call).
REFERENCE_MALLOC = {"MALLOC_TRIM_THRESHOLD_": "4294967295", "MALLOC_MMAP_THRESHOLD_": "33554432"}


def reference_env() -> dict:
    """The environment for a reference subprocess: this one plus :data:`REFERENCE_MALLOC`."""
    return dict(os.environ, **REFERENCE_MALLOC)


def cpu_description() -> str:
    """The CPU the timings come from: model name, family/model, the widest x86 vector
    instruction set it has (AVX-512, AVX2 or SSE2), and which variant our native kernels with
    several picked (``disk`` defocus filter, ``resample``, ``hsv``). Speed-ups depend on it: on
    an AVX2-only CPU several kernels run their narrower variants (see RESULTS.md)."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break          # the first processor's block
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    isa = ("AVX-512" if {"avx512f", "avx512bw"} <= flags else "AVX2" if "avx2" in flags
           else "SSE2" if flags else "unknown ISA")
    name = info.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in info:
        name += f" (family {info['cpu family']} model {info.get('model', '?')})"
    try:
        from medmnistc_fast import _native
        picked = (f"disk {_native._disk_isa()}, resample {_native._resample_isa()}, "
                  f"hsv {_native._hsv_isas()[0]}")
    except (ImportError, AttributeError, IndexError):
        picked = "native variants unknown"
    return f"{name}, {isa}; kernels: {picked}"


def ratio_summary(ratios) -> str:
    """``"median 7.7x, min 0.7x, max 180.3x"`` for a non-empty sequence of speed-ups."""
    return (f"median {statistics.median(ratios):.1f}x, min {min(ratios):.1f}x, "
            f"max {max(ratios):.1f}x")


def git_commit() -> str:
    """The short commit hash of the checkout, or "unknown"."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def add_output_args(ap: argparse.ArgumentParser, name: str) -> None:
    """``--json`` / ``--md`` (default ``results_{name}.json`` / ``RESULTS_{name}.md`` beside the
    scripts, the committed results, which a run overwrites) and ``--render-only``."""
    ap.add_argument("--json", default=os.path.join(HERE, f"results_{name}.json"),
                    help=f"JSON output (default: the committed benchmarks/results_{name}.json, "
                         "overwritten)")
    ap.add_argument("--md", default=os.path.join(HERE, f"RESULTS_{name}.md"),
                    help=f"markdown output (default: the committed benchmarks/RESULTS_{name}.md, "
                         "overwritten)")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the markdown from an existing --json, measuring nothing")


def write_results(args, result: dict, markdown) -> None:
    """Write ``result`` to ``args.json`` and ``markdown(result)`` to ``args.md``, each through a
    temporary file and ``os.replace`` (an interrupted run leaves the old files), and print the
    markdown."""
    text = markdown(result)
    for path, content in ((args.json, json.dumps(result, indent=1)), (args.md, text)):
        with open(path + ".tmp", "w") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
    print(text)


def render_only(args, markdown) -> bool:
    """With ``--render-only``: rewrite ``args.md`` as ``markdown(json of args.json)``, print it
    and return True; otherwise return False."""
    if not args.render_only:
        return False
    with open(args.json) as f:
        md = markdown(json.load(f))
    with open(args.md, "w") as f:
        f.write(md)
    print(md)
    return True


def distinct_images(n: int, size: int, rgb: bool):
    """The first ``n`` images of ``medmnistc_fast.sample.sample_images(n, size, rgb)`` without
    repeats (it cycles through 15 colour and 20 gray crops)."""
    from medmnistc_fast.sample import sample_images

    imgs = sample_images(n, size, rgb=rgb)
    seen, keep = set(), []
    for i, img in enumerate(imgs):
        if img.tobytes() not in seen:
            seen.add(img.tobytes())
            keep.append(i)
    return imgs[keep]
