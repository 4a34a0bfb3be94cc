"""Atomic file writes shared by ``generate`` and ``evaluate``: write under a temporary name in the
destination folder (``.{name}.{12 hex}.tmp``), flush and fsync, ``os.replace`` onto the final
name, then fsync the folder (so the rename itself survives a crash), so a reader never sees a
partial file and an interrupted write leaves the old file intact. New files get the usual
permissions (``open``'s 0o666 masked by the umask).
"""
from __future__ import annotations

import os
import re
import secrets
import shutil

_TMP_RE = re.compile(r"^\.(.+)\.[0-9a-f]{12}\.tmp$")


def tmp_name(directory: str, name: str) -> str:
    """A fresh temporary path ``directory/.{name}.{12 hex}.tmp``."""
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def tmp_target(entry: str):
    """The final name ``name`` of a temporary entry named as :func:`tmp_name` makes them
    (``.{name}.{12 hex}.tmp``, a folder entry's name without its directory), else None."""
    m = _TMP_RE.match(entry)
    return m.group(1) if m else None


def remove(path: str) -> None:
    """Delete a file or a folder tree; a missing path is not an error."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def fsync_dir(path: str) -> None:
    """fsync a folder (its entries: renames, new files); silently skipped where the platform or
    file system does not allow it."""
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see the module docstring).

    Raises
    ------
    OSError
        If the folder does not exist or is not writable (no temporary file is left behind).
        Its message names ``path``, not the temporary file (the OS's own message named only
        that).
    """
    path = os.fspath(path)
    tmp = tmp_name(os.path.dirname(path), os.path.basename(path))
    data = text.encode("utf-8")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        remove(tmp)
        raise type(exc)(exc.errno, f"cannot write {path!r}: {exc.strerror or exc}") from None
    except BaseException:
        remove(tmp)
        raise
    fsync_dir(os.path.dirname(path))
