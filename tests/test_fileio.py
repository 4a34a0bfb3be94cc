"""Atomic text writes (medmnistc_fast._fileio): an interrupted write leaves the old file intact."""
import os

import pytest

from medmnistc_fast import _fileio


def test_write_replaces_content_and_leaves_no_temp(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text("old\n", encoding="utf-8")
    _fileio.write_text_atomic(path, "new é\n")
    assert path.read_bytes() == "new é\n".encode("utf-8")
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_interrupted_write_keeps_the_old_file(tmp_path, monkeypatch):
    # The data is written and fsynced under a temporary name before the rename: a failure
    # there (simulated at the fsync of the new data) must leave the old file byte for byte and
    # remove the temporary file.
    path = tmp_path / "manifest.json"
    path.write_text("old content\n", encoding="utf-8")

    def failing_fsync(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(_fileio.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="I/O error"):
        _fileio.write_text_atomic(path, "new content that never lands\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "old content\n"
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_tmp_name_pattern(tmp_path):
    name = os.path.basename(_fileio.tmp_name(str(tmp_path), "a.npz"))
    assert name.startswith(".a.npz.") and name.endswith(".tmp")
    assert len(name) == len(".a.npz.") + 12 + len(".tmp")
    assert set(name[len(".a.npz."):-len(".tmp")]) <= set("0123456789abcdef")


def test_tmp_target_inverts_tmp_name(tmp_path):
    for final in ("a.npz", "pixelate.zarr", "x.y.tmp", "manifest.json"):
        assert _fileio.tmp_target(os.path.basename(_fileio.tmp_name(str(tmp_path), final))) == final
    # not temporary entries: no leading dot, an 11-hex token, upper-case hex, a final name
    for entry in ("a.npz.0123456789ab.tmp", ".a.npz.0123456789a.tmp", ".a.npz.0123456789AB.tmp",
                  "a.npz", ".a.npz.0123456789ab.tmp.x"):
        assert _fileio.tmp_target(entry) is None
