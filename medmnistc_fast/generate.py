"""Pre-generate corrupted sets (MedMNIST-C, pathology), from one laptop to a Dask cluster.

This replaces the reference's ``DatasetManager`` (``medmnistc`` 0.1.0). It reads a clean
split, corrupts it with :func:`medmnistc_fast.corrupt_batch` (the public API; never the
kernels) and writes one file per corruption, in the reference's layout::

    {out}/{flag}/{corruption}.npz      test_images (5N, H, W[, 3]) uint8, test_labels (5N, L)
    {out}/{flag}/manifest.json
    {out}/{flag}/filenames.json        (folder input only) row -> file

Inputs
------
- MedMNIST+ files ``{root}/{flag}_{size}.npz`` (the default) or the embedded sample: the 12
  MedMNIST-C datasets.
- An image folder, one sub-folder per class (``folder=``, ``--from-folder``), for any dataset
  key, the pathology suites (``pathology96``, ``pathology224``) included, or ``"pathology"``
  to pick the suite from the image size. Files are scanned, hashed and their headers checked in
  this process first (structure, readability, 8 bits per channel, one common size: nothing is
  written when this fails), then decoded once by the workers, chunk by chunk, into a temporary
  raw file beside the outputs, which the corruption tasks read like an unpacked MedMNIST+
  member. The input checksum is the SHA-256 over, per row, the path below the folder, the label
  and the SHA-256 of the file's bytes, so a moved folder still resumes; a file that changes
  between the scan and its decoding is an error. ``filenames.json`` lists ``[path, label]`` per
  row (image index = row).
- Arrays (``images=``, ``labels=``): any dataset key; read in chunks (a ``numpy.memmap``
  streams from disk); the checksum covers shapes, dtypes and bytes.

Layout and naming rules
-----------------------
- Rows are severity-major: rows ``[k*N:(k+1)*N]`` hold severity ``severities[k]`` of images
  ``0..N-1`` in input order; with all five levels, level ``s`` is rows ``[(s-1)*N:s*N]``. A
  severity subset (``severities=(1, 3)``) is sorted ascending and de-duplicated, and the file holds
  only those ``k = len(severities)`` levels, so it has ``k*N`` rows. Labels are the input labels
  tiled ``k`` times (same dtype and columns).
- Split: the members are named ``{split}_images`` / ``{split}_labels``. The test split (the
  benchmark) goes to ``{out}/{flag}/``; other splits go to ``{out}/{flag}_{split}/`` so they never
  collide with the test files.
- Image ``i`` of severity ``s`` is ``corrupt(images[i], corruption, s, dataset=flag, seed=seed,
  index=i)``: the index is the image's position in the split. Output bytes therefore do not
  depend on the number of workers, the chunk size or the scheduler.

Containers
----------
- ``fmt="npz"`` (default): a standard zip64 ``.npz`` written by streaming (see
  :mod:`medmnistc_fast._npz`); memory does not grow with the dataset. Members are **stored
  uncompressed by default**. Measured on 224 px corrupted images with zlib level 1 (one core):
  RGB 16-113 MB/s (1.3-9.3 ms per image: as much as or more than corrupting it) for sizes of
  16-90 % of raw; gray 24-187 MB/s (0.3-2.1 ms per image) for 7-88 %. The reference's
  ``savez_compressed`` (level 6) is 2-5x slower still. With ``compress=True`` members are
  deflated at level 1 inside the workers (in parallel), one independent deflate segment per
  image, so the compressed bytes too are independent of chunking.
- ``fmt="zarr"``: a zarr store ``{out}/{flag}/{corruption}.zarr`` (a group with the same two
  arrays, images chunked by ``chunk_size`` rows), written in parallel by the workers, each its
  own chunks. With ``compress=True`` zarr's default compressor is used, else none. Needs the
  ``zarr`` package (and a file system shared with the workers when a Dask scheduler is used).
  The store format is the installed zarr's default (2 with zarr 2, 3 with zarr 3); resuming
  checks the arrays' checksums, not the format.

Safety and resuming
-------------------
Every output is written under a temporary name in the same folder (``.{name}.{12 hex}.tmp``),
flushed and fsynced, then renamed. ``manifest.json`` (package version, the versions of the
libraries the bytes depend on (:func:`byte_environment`), seed, size (the image side;
null for non-square folder or array input), split, format, compression, the input's source,
SHA-256 and shape (for a folder also its root, classes and colour mode), and per file the
severities, table, shapes and SHA-256) is rewritten
atomically after each finished file. A re-run skips the files whose manifest entry matches (same
parameters, and the file's checksum recomputed from disk equals the entry), removes temporary
leftovers of interrupted runs and redoes the rest, ending byte-identical to an uninterrupted run.
An existing output made with other parameters (seed, size, version, library versions, ...) is
never overwritten unless ``overwrite=True``. With a Dask scheduler, every worker must report this
process's package and library versions (:class:`DaskEnvironmentError` otherwise), those that
join during the run included (checked before each task they run).

Parallelism and memory
----------------------
Work is cut into tasks of ``chunk_size`` output rows. ``workers=1`` runs in-process;
``workers=N`` uses a process pool (fork server or spawn; one corruption thread per worker, so
:func:`~medmnistc_fast.set_num_threads` and ``MEDMNISTC_FAST_NUM_THREADS`` do not apply) and
``scheduler=`` a Dask distributed cluster; at most about two tasks per worker are in flight.
When a dataset has at least two stored ``.npz`` files to write per pool worker, each worker
writes whole files (reading its input rows from the input file itself, corrupting chunk by
chunk, hashing as it writes), so no byte crosses between processes and the parent only commits
finished files; otherwise pool workers ``pwrite`` stored npz chunks straight into the temporary
output file and the parent reads them back in order for the running SHA-256. With Dask, images travel with the tasks and results come back to the parent, so only
zarr output needs a shared file system. Sealed files are fsynced, renamed and recorded by a
background thread while the next file is computed. Measured peak resident memory for a
20,000-image gray 224 px set with 2 workers: about 540 MB for the whole process tree.

Checksums: for ``.npz`` the manifest's ``sha256`` is the file's (``sha256sum`` gives the same).
For zarr, ``images_sha256`` is the SHA-256 of the concatenated SHA-256 digests of each image's
C-order bytes, in row order, and ``labels_sha256`` that of the labels' C-order bytes.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import struct
import sys
import warnings
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import registry
from ._npz import (NpzWriter, copy_member_data, crc32, deflate_segments, inspect_npz,
                   read_member_array)
from ._fileio import fsync_dir as _fsync_dir
from ._fileio import remove as _remove
from ._fileio import tmp_name as _tmp_name
from ._fileio import tmp_target as _tmp_target
from ._fileio import write_text_atomic as _write_text_atomic
from ._cpus import available_cpus
from .sample import MAX_SIZE as SAMPLE_MAX_SIZE
from .sample import SPLIT_IMAGES
from ._version import __version__
from ._validation import (_fmt_choices, _is_int, as_hwc, check_dataset, check_folder, check_path,
                          missing_extra, reject_masked)
from ._validation import defined_elsewhere, parse_decimal, unknown_corruption_message
from ._validation import check_int as _check_int
from .datasets import MANIFEST_GENERATOR, SPLITS, _check_split, folder_name
from .api import corrupt, corrupt_batch, severity_table
from .corruptions.pathology import suite_for_size

__all__ = ["generate", "input_path", "output_dir", "load_images", "render_preview",
           "preview_cell", "folder_suite", "byte_environment", "DEFAULT_ROOT", "SPLITS", "FORMATS", "MANIFEST", "MAX_WORKERS",
           "DOWNLOAD_URL", "IMAGE_EXTENSIONS", "FILENAMES", "PATHOLOGY_AUTO",
           "DaskEnvironmentError", "WorkerDiedError"]


class DaskEnvironmentError(RuntimeError):
    """A Dask worker runs another medmnistc_fast or other library versions
    (:func:`byte_environment`) than the process running :func:`generate`: its outputs would mix
    bytes of different setups. The message lists each differing worker and value."""


class WorkerDiedError(RuntimeError):
    """A worker process of a :func:`generate` run with ``workers`` > 1 died: a script calling
    ``generate`` without the ``__main__`` guard, or a worker killed by the operating system
    (out of memory). Files finished before it stay complete, so a re-run resumes."""

#: Default folder of the MedMNIST+ ``.npz`` files (the ``medmnist`` package's default).
DEFAULT_ROOT = os.path.join("~", ".medmnist")
#: Output containers.
FORMATS = ("npz", "zarr")
#: Name of the per-dataset manifest.
MANIFEST = "manifest.json"
#: Zenodo record of MedMNIST+ (all sizes).
DOWNLOAD_URL = "https://zenodo.org/records/10519652"
#: Image sides of the MedMNIST+ files (``{flag}.npz`` at 28 px, ``{flag}_{size}.npz`` else).
MEDMNIST_SIZES = (28, 64, 128, 224)
#: File name endings read from an image folder (compared in lower case).
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
#: Row-to-file map written beside the outputs of a folder input.
FILENAMES = "filenames.json"
#: Dataset key that picks the pathology suite from the image size (folder or arrays input).
PATHOLOGY_AUTO = "pathology"

# Pillow modes accepted from image folders (8 bits per channel), converted to "RGB" or "L"
# (alpha dropped, palettes expanded, CMYK / YCbCr converted by Pillow).
_PIL_MODES = frozenset({"1", "L", "LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK",
                        "YCbCr"})
# Raw (file) modes of more than 8 bits per channel that Pillow would silently reduce to 8 bits.
_DEEP_RAWMODE = re.compile(r"^[IF](;|$)|;(12|16|24|32|64)")

_MANIFEST_VERSION = 1
_CHUNK_BYTES = 8 << 20          # default task size: about 8 MiB of images
_MIN_CHUNK, _MAX_CHUNK = 16, 1024
_IO_BLOCK = 16 << 20
_DASK_INLINE_BYTES = 2 << 20
_INFLIGHT_BYTES = 1 << 30


# ============================================================================== names and paths
def input_path(root, dataset: str, size: int) -> str:
    """Path of a MedMNIST+ file: ``{root}/{flag}.npz`` at 28 px, ``{root}/{flag}_{size}.npz`` else.

    Parameters
    ----------
    root : str, os.PathLike or None
        The MedMNIST+ folder; a leading ``~`` is expanded; None means :data:`DEFAULT_ROOT`.
    dataset : str
        The MedMNIST flag (such as ``"pathmnist"``); not checked, only formatted.
    size : int
        Image side in pixels (MedMNIST+ has 28, 64, 128, 224); not checked, only formatted.

    Returns
    -------
    str
        The path (the file need not exist).

    Raises
    ------
    TypeError
        ``root`` neither None, a str nor an os.PathLike (bytes included).
    ValueError
        ``root`` is ``''``.
    """
    root = check_folder(DEFAULT_ROOT if root is None else root, "root")
    return os.path.join(root, f"{dataset}.npz" if size == 28 else f"{dataset}_{size}.npz")


def output_dir(out, dataset: str, split: str = "test") -> str:
    """Folder of a dataset's outputs: ``{out}/{flag}`` for test, ``{out}/{flag}_{split}`` else.

    Parameters
    ----------
    out : str or os.PathLike
        The ``generate`` output folder (a leading ``~`` expanded).
    dataset : str
        A non-empty dataset key.
    split : {"test", "val", "train"}, default "test"

    Returns
    -------
    str
        ``os.path.join(out, folder_name(dataset, split))`` (the folder need not exist).

    Raises
    ------
    TypeError
        ``out`` not a str or os.PathLike; ``dataset`` or ``split`` not a str.
    ValueError
        ``out`` or ``dataset`` is ``''``; ``split`` not one of "test", "val", "train"
        (:func:`medmnistc_fast.datasets.folder_name`).
    """
    out = check_folder(out, "out")
    return os.path.join(out, folder_name(dataset, split))


def _missing_message(path: str, size: int, dataset: str) -> str:
    folder = os.path.dirname(path)
    if os.path.isfile(folder):
        # --root pointed at the .npz itself: the file name was appended to it
        return (f"MedMNIST+ file not found: {path}. --root (root=) names the file {folder}; "
                f"it must be the folder holding {os.path.basename(path)}")
    other = [s for s in MEDMNIST_SIZES
             if s != size and os.path.isfile(input_path(folder, dataset, s))]
    if other:
        found = ", ".join(f"{os.path.basename(input_path(folder, dataset, s))} (--size {s})"
                          for s in other)
        return (f"MedMNIST+ file not found: {path}. That folder holds {dataset} at other sizes: "
                f"{found}; --size (size=) chooses the file, default 224")
    if size not in MEDMNIST_SIZES:
        get = (f"MedMNIST+ files come at 28, 64, 128 and 224 px only: at {size} px, write "
               f"your own file in their format (test_images, test_labels)")
    else:
        get = (f"Get it with `pip install medmnist` then `python -m medmnist download "
               f"--size={size}` (downloads every dataset into ~/.medmnist), or from "
               f"{DOWNLOAD_URL}")
    # a mistyped --root: say so, or users look for a download problem
    missing = "" if os.path.isdir(folder) else f" (the folder {folder} does not exist)"
    return (f"MedMNIST+ file not found: {path}{missing}. {get}; point --root (root=) at the "
            f"folder holding it, or use --sample (sample=True) to run on the embedded sample "
            f"images.")


# ======================================================================= argument normalisation
def _check_bool(value, name: str) -> bool:
    """``value`` if it is a bool (a str such as "no" would be truthy: rejected)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True or False); got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def _as_list(value, name: str) -> list:
    if isinstance(value, Mapping):
        # list() of a mapping is its keys: {"pixelate": [1, 2]} would silently mean every level
        raise TypeError(f"{name} must be a sequence or a comma-separated str, not a mapping; "
                        f"got {type(value).__name__}")
    if isinstance(value, (bytes, bytearray)):
        # list() of bytes is their byte values: b"1,2" was read as levels 49, 44, 50
        raise TypeError(f"{name} must be a sequence or a comma-separated str, not "
                        f"{type(value).__name__}; got {value!r}")
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
        if value.strip() and not all(items):
            raise ValueError(f"{name} must be a comma-separated list without empty items; "
                             f"got {value!r}")
        return [v for v in items if v]
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{name} must be a sequence or a comma-separated str; "
                        f"got {value!r}") from None


def _suite_message(d: str) -> str:
    return (f"{d} has no MedMNIST+ files or sample; generate it from an image folder "
            f"(folder= / --from-folder) or from arrays (images=, labels=)")


def _resolve_datasets(dataset) -> list:
    """MedMNIST+ flags for file and sample inputs (``"all"``: the 12 datasets)."""
    if dataset is None:  # not "all": a forgotten argument must not start a run of all twelve
        raise TypeError("dataset must be a str (a flag, a comma-separated list or 'all') or a "
                        "sequence of flags; got None")
    names = _as_list(dataset, "dataset")
    if not names:
        raise ValueError("dataset must name at least one dataset, or 'all'")
    if "all" in names:
        return list(registry.DATASETS)
    out = []
    for d in names:
        if d in registry.PATHOLOGY_SUITES or d == PATHOLOGY_AUTO:
            raise ValueError(_suite_message(d))
        try:
            check_dataset(d, tuple(registry.DATASETS) + ("all",))
        except ValueError as exc:  # the suites are valid keys too, for other inputs
            raise ValueError(f"{exc}; an image folder (--from-folder, folder=) or arrays "
                             f"(images=) also take "
                             f"{_fmt_choices(list(registry.PATHOLOGY_SUITES) + [PATHOLOGY_AUTO])}"
                             ) from None
        if d not in out:
            out.append(d)
    return out


def _single_input_dataset(dataset) -> str:
    """The one dataset key of a folder or arrays input (any key, or ``"pathology"``)."""
    valid = _fmt_choices(list(registry.TABLES) + [PATHOLOGY_AUTO])
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str (one dataset key with folder= or images=); "
                        f"got {type(dataset).__name__}")
    if dataset not in registry.TABLES and dataset != PATHOLOGY_AUTO:
        hint = (" (folder= and images= take one dataset key)"
                if "," in dataset or dataset == "all" else "")
        raise ValueError(f"unknown dataset {dataset!r}{hint}; valid datasets: {valid}")
    return dataset


def _single_dataset(dataset) -> str:
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str; got {type(dataset).__name__}")
    if dataset in registry.PATHOLOGY_SUITES:
        raise ValueError(_suite_message(dataset))
    return check_dataset(dataset, registry.DATASETS)


def _resolve_corruptions(datasets: list, corruptions) -> dict:
    """``{dataset: [corruption, ...]}`` in the reference's order; validated."""
    if corruptions is None:
        return {d: list(registry.TABLES[d]) for d in datasets}
    wanted = _as_list(corruptions, "corruptions")
    if not wanted:
        raise ValueError("corruptions must name at least one corruption")
    every = {c for d in datasets for c in registry.TABLES[d]}
    for c in wanted:
        if not isinstance(c, str):  # as AugMedMNISTC and corrupt() treat a non-str name
            raise TypeError(f"corruptions must hold corruption names (str); got {c!r} "
                            f"({type(c).__name__})")
        if c not in every:
            if len(datasets) == 1:
                raise ValueError(unknown_corruption_message(datasets[0], c))
            raise ValueError(f"corruption {c!r} is not defined for any of the selected datasets; "
                             f"valid corruptions: {_fmt_choices(sorted(every))}"
                             f"{defined_elsewhere(c, datasets)}")
    return {d: [c for c in registry.TABLES[d] if c in wanted] for d in datasets}


def _resolve_severities(severities) -> tuple:
    if severities is None:
        return tuple(range(1, registry.N_SEVERITIES + 1))
    if _is_int(severities):
        severities = [severities]  # one level, as "3" is
    values = _as_list(severities, "severities")
    if not values:
        raise ValueError("severities must list at least one level in 1..5")
    out = set()
    for v in values:
        if isinstance(v, str):
            text, v = v, parse_decimal(v)  # int() took "1_0" as 10, "\u0663" as 3
            if v is None:
                raise ValueError(f"severities must hold ints in 1..{registry.N_SEVERITIES}; "
                                 f"got {text!r}")
        if not _is_int(v):
            raise TypeError(f"severities must hold ints in 1..{registry.N_SEVERITIES}; got "
                            f"{v!r} ({type(v).__name__})")
        if not 1 <= v <= registry.N_SEVERITIES:
            raise ValueError(f"severities must hold ints in 1..{registry.N_SEVERITIES}; got {v!r}")
        out.add(int(v))
    return tuple(sorted(out))


def _default_chunk(image_bytes: int) -> int:
    return int(min(_MAX_CHUNK, max(_MIN_CHUNK, _CHUNK_BYTES // max(1, image_bytes))))


def _default_workers() -> int:
    return available_cpus()


def _unimportable_main():
    """The main module's file when worker processes could not import it (a script read from
    standard input: ``__file__ == '<stdin>'``), else None. The pool's workers (fork server or
    spawn) import the main module first, and die on such a path."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return path if isinstance(path, str) and not os.path.exists(path) else None


def _check_not_bootstrapping() -> None:
    """RuntimeError if this process is a worker still importing the main module (a script that
    calls :func:`generate` without ``if __name__ == "__main__":``, which pool workers re-run
    on start): it used to start a second run in every worker, which stopped at the output
    folder's lock with "being written by another generate run" and left the real run with a
    BrokenProcessPool. ``_inheriting`` is the flag multiprocessing itself checks for this."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError("generate was called while a worker process of a generate run "
                           "imported the main module: worker processes re-run the script's "
                           "top level, so call generate under `if __name__ == '__main__':` "
                           "(or pass workers=1)")


def _same_folder(a: str, b: str) -> bool:
    """Whether the paths ``a`` and ``b`` name one folder: the same path once symbolic links
    are resolved, or, both existing, the same file-system object (``os.path.samefile``:
    device and inode). Resolved paths alone missed a bind mount of the folder and, on a
    case-insensitive file system (macOS, Windows), another spelling of its name."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be read): not the same folder
        return False


def _check_out_beside_folder(out, folder) -> None:
    """ValueError unless ``out`` leaves ``folder`` (--from-folder) as the run found it: ``out``
    the folder itself, or inside it under a sub-folder the run would create
    (``--from-folder DIR --out DIR/results``), adds a sub-folder without images beside the
    class folders; the next run (a resume) scans it as one more class and stops at "class
    folder ... holds no images". (Inside an existing class folder is a skipped entry.) Each
    folder on the way up from ``out`` is compared with ``folder`` by :func:`_same_folder`."""
    real_out = os.path.realpath(check_folder(out, "out"))
    real_folder = os.path.realpath(check_folder(folder, "folder"))
    p, top = real_out, None  # top: the folder below p on the way to out
    while not _same_folder(p, real_folder):
        parent = os.path.dirname(p)
        if parent == p:
            return  # out is not inside folder
        p, top = parent, p
    if top is None:
        raise ValueError(f"out must be another folder than folder (--from-folder), whose "
                         f"sub-folders are the classes: the outputs written there would be "
                         f"read as a class by the next run; got out={os.fspath(out)!r} and "
                         f"folder={os.fspath(folder)!r}, the same folder")
    if not os.path.isdir(top):
        raise ValueError(f"out must not be a new folder inside folder (--from-folder), whose "
                         f"sub-folders are the classes: {top} would be read as a class "
                         f"without images by the next run; got out={os.fspath(out)!r} and "
                         f"folder={os.fspath(folder)!r}")


def _check_output_dir_beside_folder(out, folder, dataset: str, split: str) -> None:
    """ValueError when the dataset's output folder ``{out}/{flag}`` is ``folder``
    (--from-folder) itself (``--out DIR --from-folder DIR/pathology96``): the outputs would be
    written beside the class folders, and every later run would list them as skipped entries
    of the image folder. Compared by :func:`_same_folder`."""
    target = output_dir(out, dataset, split)
    if _same_folder(target, check_folder(folder, "folder")):
        raise ValueError(f"out must not be the folder that holds folder (--from-folder) under "
                         f"the output folder's name: the {dataset} outputs go to {target}, "
                         f"which is the image folder itself, beside its class folders; got "
                         f"out={os.fspath(out)!r} and folder={os.fspath(folder)!r}; pass "
                         f"another out")


#: Most worker processes a local run starts (as :data:`medmnistc_fast.api.MAX_THREADS` for
#: threads): far above any machine's core count, low enough that a typo is refused.
MAX_WORKERS = 1024


def _resolve_workers(workers) -> int:
    """``workers`` checked (None: one per available core); one worker when the main module
    cannot be imported by worker processes and none were asked for (an error if they were)."""
    bad_main = _unimportable_main()
    if workers is None:
        return 1 if bad_main else _default_workers()
    # Bounded like the thread counts of corrupt_batch: --workers 99999 used to start processes
    # until the machine ran out of memory or process slots.
    workers = _check_int(workers, "workers", 1, MAX_WORKERS)
    if workers > 1 and bad_main:
        raise ValueError(f"workers must be 1 here: worker processes import the main module, "
                         f"and {bad_main!r} is not a file (a script read from standard input); "
                         f"save the script to a file, or pass workers=1; got workers={workers}")
    return workers


# ====================================================================================== inputs
@dataclass(frozen=True)
class _FileRef:
    """Raw uint8 images in a file at ``offset`` (C order), read in row slices with plain reads."""

    path: str
    offset: int
    n: int
    image_shape: tuple

    def read(self, lo: int, hi: int, out: np.ndarray | None = None, f=None) -> np.ndarray:
        """Rows ``[lo, hi)``; into ``out`` (C-contiguous uint8, at least ``hi - lo`` rows; its
        first rows are returned) and through the open binary file ``f`` when given."""
        per = int(np.prod(self.image_shape))
        if out is None:
            out = np.empty((hi - lo,) + tuple(self.image_shape), np.uint8)
        else:
            out = out[: hi - lo]
        buf = memoryview(out).cast("B")
        with (open(self.path, "rb", buffering=0) if f is None else contextlib.nullcontext(f)) as fh:
            fh.seek(self.offset + lo * per)
            got = 0
            while got < buf.nbytes:
                k = fh.readinto(buf[got:])
                if not k:
                    raise OSError(f"{self.path}: unexpected end of file (truncated input?)")
                got += k
        return out


@dataclass(frozen=True)
class _Folder:
    """A scanned image folder: files in row order and their SHA-256 (checked when decoded)."""

    root: str                 # absolute path
    classes: tuple            # class sub-folder names, sorted; label = index
    rel: tuple                # "class/file" per row (always "/"-separated)
    labels: tuple             # int label per row
    digests: tuple            # SHA-256 (32 bytes) of each file's bytes
    mode: str                 # Pillow mode decoded to: "RGB" or "L"


@dataclass
class _Input:
    """One dataset's validated input split."""

    dataset: str
    split: str
    size: int | None                      # side of square images; None if not square
    n: int
    image_shape: tuple
    labels: np.ndarray
    path: str | None = None               # the .npz (None for the other sources)
    member: object = None                 # _npz.MemberInfo of the images
    array: np.ndarray | None = None       # in-memory images (the sample, images=)
    sample_n: int | None = None
    sha256: str | None = None
    ref: _FileRef | None = None           # where workers read images (set when running)
    source: str = "file"                  # "file", "sample", "arrays" or "folder"
    folder: _Folder | None = None

    def read(self, lo: int, hi: int) -> np.ndarray:
        if self.array is not None:
            return self.array[lo:hi]
        return self.ref.read(lo, hi)

    def record(self) -> dict:
        if self.source == "sample":
            src = {"source": "sample", "sample_n": self.sample_n}
        elif self.source == "arrays":
            src = {"source": "arrays"}
        elif self.source == "folder":
            f = self.folder
            src = {"source": "folder", "root": f.root, "classes": list(f.classes),
                   "mode": f.mode, "filenames": FILENAMES}
        else:
            src = {"source": "file", "file": os.path.basename(self.path)}
        return dict(src, sha256=self.sha256, n=self.n, image_shape=list(self.image_shape),
                    labels_shape=list(self.labels.shape), labels_dtype=self.labels.dtype.str)


def _check_split_arrays(where: str, dataset: str, size: int, split: str, shape, dtype,
                        fortran: bool, labels_shape, labels_dtype) -> None:
    key = f"{split}_images"
    rgb = registry.RGB[dataset]
    want = f"(N, {size}, {size}, 3)" if rgb else f"(N, {size}, {size})"
    kind = "an RGB" if rgb else "a gray"
    if np.dtype(dtype) != np.uint8:
        raise ValueError(f"{where}: {key} has dtype {np.dtype(dtype)}; expected uint8")
    if fortran:
        raise ValueError(f"{where}: {key} is stored in Fortran order; re-save it in C order "
                         f"(numpy.savez of a C-contiguous array)")
    ok = (len(shape) == (4 if rgb else 3) and tuple(shape[1:3]) == (size, size)
          and (not rgb or shape[3] == 3))
    if not ok:
        raise ValueError(f"{where}: {key} has shape {tuple(shape)}; {dataset} is {kind} dataset, "
                         f"expected {want} at size {size}")
    if shape[0] == 0:
        raise ValueError(f"{where}: {key} holds no images")
    lkey = f"{split}_labels"
    if np.dtype(labels_dtype).kind not in "biu":
        raise ValueError(f"{where}: {lkey} has dtype {np.dtype(labels_dtype)}; expected integers")
    if (len(labels_shape) not in (1, 2) or labels_shape[0] != shape[0]
            or (len(labels_shape) == 2 and labels_shape[1] == 0)):
        raise ValueError(f"{where}: {lkey} has shape {tuple(labels_shape)}; expected "
                         f"({shape[0]}, L) with L >= 1 to match {key}")


def _open_file_input(dataset: str, split: str, size: int, root) -> _Input:
    path = input_path(root, dataset, size)
    if not os.path.isfile(path):
        raise FileNotFoundError(_missing_message(path, size, dataset))
    members = inspect_npz(path)
    for key in (f"{split}_images", f"{split}_labels"):
        if key not in members:
            found = ", ".join(sorted(members)) or "none"
            raise ValueError(f"{path} has no array {key!r} (arrays found: {found})")
    img, lab = members[f"{split}_images"], members[f"{split}_labels"]
    _check_split_arrays(path, dataset, size, split, img.shape, img.dtype, img.fortran_order,
                        lab.shape, lab.dtype)
    labels = read_member_array(path, lab)
    # 1-D labels become (N, 1), MedMNIST's own layout, as for array input (_open_array_input).
    return _Input(dataset, split, size, img.shape[0], tuple(img.shape[1:]),
                  np.ascontiguousarray(labels.reshape(labels.shape[0], -1)), path=path,
                  member=img)


def _open_sample_input(dataset: str, split: str, size: int, n: int) -> _Input:
    from .sample import sample_split

    d = sample_split(dataset, size=size, n=n)
    images, labels = d[f"{split}_images"], d[f"{split}_labels"]
    _check_split_arrays("sample", dataset, size, split, images.shape, images.dtype, False,
                        labels.shape, labels.dtype)
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(images).data)
    h.update(np.ascontiguousarray(labels).data)
    return _Input(dataset, split, size, images.shape[0], tuple(images.shape[1:]),
                  np.ascontiguousarray(labels), array=np.ascontiguousarray(images),
                  sample_n=n, sha256=h.hexdigest(), source="sample")


# ------------------------------------------------------------------------------ arrays input
def _input_rgb(dataset: str) -> bool:
    return dataset == PATHOLOGY_AUTO or registry.RGB[dataset]


def _open_array_input(dataset: str, split: str, images, labels) -> _Input:
    """``images=`` / ``labels=``: validated; hashed chunk by chunk (never copied whole)."""
    # before anything is written (corrupt_batch would refuse masked images only after the
    # output folder and manifest exist; np.asarray would drop the mask of labels)
    reject_masked(images, "images")
    reject_masked(labels, "labels")
    x = images if isinstance(images, np.ndarray) else np.asarray(images)
    if x.dtype != np.uint8:
        raise TypeError(f"images must be a uint8 array; got dtype {x.dtype} (convert it "
                        f"yourself, e.g. np.clip(a * 255, 0, 255).astype(np.uint8), so that no "
                        f"rescaling is guessed)")
    rgb = _input_rgb(dataset)
    if rgb and (x.ndim != 4 or x.shape[3] != 3):
        raise ValueError(f"images has shape {x.shape}; {dataset} is an RGB dataset: expected "
                         f"(N, H, W, 3)")
    if not rgb and x.ndim != 3:
        raise ValueError(f"images has shape {x.shape}; {dataset} is a gray dataset: expected "
                         f"(N, H, W)" + (" (drop the channel axis: images[..., 0])"
                                         if x.ndim == 4 and x.shape[3] == 1 else ""))
    if x.shape[0] == 0:
        raise ValueError("images holds no images (N = 0)")
    if min(x.shape[1:3]) < 8:
        raise ValueError(f"images has shape {x.shape}; images must be at least 8 x 8 pixels")
    y = np.asarray(labels)
    if y.dtype.kind not in "biu":
        raise TypeError(f"labels must be an integer (or bool) array; got dtype {y.dtype}")
    # (N, 0) labels used to be written as (kN, 0) arrays: sets with no labels to evaluate.
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0] or (y.ndim == 2 and y.shape[1] == 0):
        raise ValueError(f"labels has shape {y.shape}; expected ({x.shape[0]},) or "
                         f"({x.shape[0]}, L) with L >= 1 to match images {x.shape}")
    # small; later edits by the caller are moot. 1-D labels become (N, 1), MedMNIST's layout
    # (and that of --from-folder), so every output has (kN, L) labels.
    y = np.array(y.reshape(y.shape[0], -1), order="C", copy=True)
    if dataset == PATHOLOGY_AUTO:
        dataset = suite_for_size(x.shape[1], x.shape[2])
    h = hashlib.sha256()
    h.update(f"arrays images {list(x.shape)} labels {list(y.shape)} {y.dtype.str}\n".encode())
    per = int(np.prod(x.shape[1:]))
    step = max(1, _IO_BLOCK // per)
    for lo in range(0, x.shape[0], step):
        h.update(np.ascontiguousarray(x[lo:lo + step]).data)
    h.update(y.data)
    hh, ww = x.shape[1:3]
    return _Input(dataset, split, hh if hh == ww else None, x.shape[0], tuple(x.shape[1:]), y,
                  array=x, sha256=h.hexdigest(), source="arrays")


# ------------------------------------------------------------------------------ folder input
def _refuse_broken_link(entry) -> None:
    """ValueError for a symbolic link (a ``os.DirEntry``) whose target is missing (an unmounted
    drive, a moved slide folder). Skipped as "not an image" with a warning, a class folder's
    link dropped the class and shifted the labels of the classes after it; an image's link
    dropped that row."""
    if entry.is_symlink() and not os.path.exists(entry.path):
        raise ValueError(f"{entry.path} is a broken symbolic link (its target "
                         f"{os.readlink(entry.path)} does not exist): restore the target or "
                         f"remove the link")


def _scan_folder(folder, warn: bool = True) -> tuple:
    """``(root, classes, rel, labels)`` of an image folder; structure errors raise. With
    ``warn``, a UserWarning names the entries skipped (not images generate reads)."""
    root = os.path.abspath(check_folder(folder, "folder"))
    if not os.path.exists(root):
        raise FileNotFoundError(f"image folder not found: {root}")
    if not os.path.isdir(root):
        raise ValueError(f"{root} is not a folder; --from-folder (folder=) takes a folder with "
                         f"one sub-folder of images per class")
    classes, skipped = [], []
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.name.startswith("."):
            continue
        _refuse_broken_link(e)  # a class folder, as likely as a README
        if e.is_dir():
            classes.append(e.name)
        elif e.name.lower().endswith(IMAGE_EXTENSIONS):
            # an image here means a class folder was passed, or one image was misplaced
            raise ValueError(f"{e.path} is an image directly under the image folder; images go "
                             f"in one sub-folder per class "
                             f"({os.path.join(root, 'CLASS', 'IMAGE')}.png): if {root} is one "
                             f"class's folder, pass its parent; else move or remove the image")
        else:  # a README, a labels file: not part of the data
            skipped.append(e.name)
    if not classes:
        raise ValueError(f"{root} has no class sub-folders; expected one sub-folder of images "
                         f"per class ({os.path.join(root, 'CLASS', 'IMAGE')}.png)")
    rel, labels = [], []
    for k, c in enumerate(classes):
        d = os.path.join(root, c)
        with os.scandir(d) as it:
            visible = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        for e in visible:
            if e.name.lower().endswith(IMAGE_EXTENSIONS):
                _refuse_broken_link(e)
        names = [e.name for e in visible
                 if e.name.lower().endswith(IMAGE_EXTENSIONS) and e.is_file()]
        skipped.extend(f"{c}/{e.name}" for e in visible if e.name not in names)
        if not names:
            raise ValueError(f"class folder {d} holds no images "
                             f"({', '.join(IMAGE_EXTENSIONS)}, any case): add images or remove it")
        rel.extend(f"{c}/{n}" for n in names)
        labels.extend([k] * len(names))
    if skipped and warn:
        shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        what = ("1 entry", "is not an image", "was") if len(skipped) == 1 else (
            f"{len(skipped)} entries", "are not images", "were")
        warnings.warn(f"{what[0]} of {root} and its class folders {what[1]} generate reads "
                      f"({', '.join(IMAGE_EXTENSIONS)}, any case) and {what[2]} skipped: "
                      f"{shown}", UserWarning, stacklevel=3)
    return root, tuple(classes), tuple(rel), tuple(labels)


def _row_path(root: str, rel: str) -> str:
    return os.path.join(root, *rel.split("/"))


def _raw_modes(im) -> list:
    out = []
    for t in getattr(im, "tile", None) or ():
        args = t[3] if len(t) > 3 else None
        if isinstance(args, tuple) and args and isinstance(args[0], str):
            args = args[0]
        if isinstance(args, str):
            out.append(args)
    return out


def _probe_image(path: str, data: bytes) -> tuple:
    """``(H, W)`` from the header of an image file's bytes; refuses deep or odd modes."""
    from PIL import Image

    try:
        im = Image.open(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - Pillow raises many kinds for unreadable files
        # Pillow's message names the in-memory buffer ("<_io.BytesIO object at 0x...>")
        why = re.sub(r"\s*<_io\.BytesIO object at 0x[0-9a-fA-F]+>", "", str(exc)).strip()
        raise ValueError(f"{path}: not an image Pillow can read ({why or type(exc).__name__})"
                         ) from None
    with im:
        mode = im.mode
        deep = mode in ("I", "F") or mode.startswith(("I;", "F;")) or any(
            _DEEP_RAWMODE.search(r) for r in _raw_modes(im))
        if deep:
            raise ValueError(f"{path}: {mode!r} image with more than 8 bits per channel "
                             f"(16-bit, 32-bit or floating-point pixels) is not supported: "
                             f"convert it to 8 bits per channel first, choosing how to rescale "
                             f"(the corruptions are defined on uint8 images)")
        if mode not in _PIL_MODES:
            raise ValueError(f"{path}: Pillow mode {mode!r} is not supported; expected one of "
                             f"{', '.join(sorted(_PIL_MODES))}")
        w, h = im.size
    return int(h), int(w)


def _folder_sha256(rel, labels, digests) -> str:
    """SHA-256 over, per row in order: len(path) (uint32 LE), path bytes, label (int64 LE),
    SHA-256 of the file's bytes; ``path`` is the "/"-separated path below the folder."""
    h = hashlib.sha256()
    for r, lab, dig in zip(rel, labels, digests):
        b = os.fsencode(r)
        h.update(struct.pack("<I", len(b)) + b + struct.pack("<q", lab) + dig)
    return h.hexdigest()


def _open_folder_input(dataset: str, split: str, folder, progress: bool) -> _Input:
    """Scan a class-folder tree, read every file once (SHA-256 and image header), check sizes."""
    from tqdm.auto import tqdm

    root, classes, rel, labels = _scan_folder(folder)
    digests = []
    first = None
    with tqdm(total=len(rel), unit="img", leave=False, desc="scan image folder",
              disable=not progress, dynamic_ncols=True) as bar:
        for r in rel:
            path = _row_path(root, r)
            with open(path, "rb") as f:
                data = f.read()
            digests.append(hashlib.sha256(data).digest())
            hw = _probe_image(path, data)
            if first is None:
                first = (path, hw)
                if min(hw) < 8:
                    raise ValueError(f"{path} is {hw[0]} x {hw[1]} px (H x W); images must be at "
                                     f"least 8 x 8 pixels")
            elif hw != first[1]:
                raise ValueError(f"{path} is {hw[0]} x {hw[1]} px (H x W) but the first image, "
                                 f"{first[0]}, is {first[1][0]} x {first[1][1]} px; every image "
                                 f"of a folder must have the same size (crop or resize them "
                                 f"first)")
            bar.update(1)
    hh, ww = first[1]
    if dataset == PATHOLOGY_AUTO:
        dataset = suite_for_size(hh, ww)
    rgb = registry.RGB[dataset]
    fol = _Folder(root, classes, rel, labels, tuple(digests), "RGB" if rgb else "L")
    lab = np.asarray(labels, np.uint8 if len(classes) <= 256 else np.int64).reshape(-1, 1)
    return _Input(dataset, split, hh if hh == ww else None, len(rel),
                  (hh, ww, 3) if rgb else (hh, ww), lab,
                  sha256=_folder_sha256(rel, labels, fol.digests), source="folder", folder=fol)


def folder_suite(folder) -> tuple:
    """The pathology suite for an image folder, from its first image: ``(suite, (H, W))``.

    Reads the folder's listing and the first image's header only (see :func:`generate` for the
    folder layout); entries that are not images are skipped without the warning
    :func:`generate` gives about them. ``suite`` is
    :func:`medmnistc_fast.corruptions.pathology.suite_for_size` of ``(H, W)``:
    ``"pathology96"`` up to 160 px, ``"pathology224"`` above.

    Parameters
    ----------
    folder : str or os.PathLike
        The image folder, one sub-folder per class (a leading ``~`` expanded).

    Returns
    -------
    tuple of (str, (int, int))
        The suite key and the first image's (H, W) in pixels.

    Raises
    ------
    TypeError
        ``folder`` not a str or os.PathLike (bytes included).
    FileNotFoundError, ValueError
        As in :func:`generate` for the folder structure and the first image.
    """
    # generate, which reads the folder next, names the skipped entries (the command line
    # showed its warning twice for --dataset pathology)
    root, _, rel, _ = _scan_folder(folder, warn=False)
    path = _row_path(root, rel[0])
    with open(path, "rb") as f:
        hw = _probe_image(path, f.read())
    return suite_for_size(*hw), hw


@dataclass(frozen=True)
class _DecodeTask:
    """Rows of a folder input to decode into the raw spool file at ``offset`` (picklable)."""

    root: str
    rel: tuple
    digests: tuple
    mode: str
    image_shape: tuple
    spool: str
    offset: int


def _write_at(path: str, offset: int, data) -> None:
    view = memoryview(data).cast("B")
    if hasattr(os, "pwrite"):
        fd = os.open(path, os.O_WRONLY)
        try:
            done = 0
            while done < view.nbytes:
                done += os.pwrite(fd, view[done:], offset + done)
        finally:
            os.close(fd)
        return
    with open(path, "r+b") as f:  # pragma: no cover - not on POSIX
        f.seek(offset)
        f.write(view)


def _decode_rows(task: _DecodeTask) -> int:
    """Decode files with Pillow (first frame, ``convert(mode)``) into the spool; returns rows."""
    from PIL import Image

    out = np.empty((len(task.rel),) + tuple(task.image_shape), np.uint8)
    for i, (r, dig) in enumerate(zip(task.rel, task.digests)):
        path = _row_path(task.root, r)
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).digest() != dig:
            raise ValueError(f"{path} changed while the set was being generated (its SHA-256 "
                             f"differs from the first pass); re-run once the folder is stable")
        try:
            with Image.open(io.BytesIO(data)) as im:
                arr = np.asarray(im.convert(task.mode))
        except Exception as exc:  # noqa: BLE001 - truncated or corrupt image data
            raise ValueError(f"{path}: cannot decode the image ({exc})") from None
        if arr.shape != tuple(task.image_shape):
            raise ValueError(f"{path} decodes to shape {arr.shape}; expected "
                             f"{tuple(task.image_shape)}")
        out[i] = arr
    _write_at(task.spool, task.offset, out)
    return len(task.rel)


def _decode_folder(inp: _Input, spool: str, runner, chunk: int, progress: bool) -> None:
    """Decode every image of a folder input once, in the workers, into a raw uint8 file."""
    from tqdm.auto import tqdm

    fol, per = inp.folder, int(np.prod(inp.image_shape))
    with open(spool, "wb") as f:
        f.truncate(inp.n * per)
    pending = deque()
    try:
        with tqdm(total=inp.n, unit="img", leave=False, desc=f"{inp.dataset}: decode images",
                  disable=not progress, dynamic_ncols=True) as bar:
            for lo in range(0, inp.n, chunk):
                hi = min(inp.n, lo + chunk)
                task = _DecodeTask(fol.root, fol.rel[lo:hi], fol.digests[lo:hi], fol.mode,
                                   inp.image_shape, spool, lo * per)
                pending.append(runner.call(_decode_rows, task))
                while len(pending) >= runner.capacity:
                    bar.update(pending.popleft().result())
            while pending:
                bar.update(pending.popleft().result())
    except BaseException:
        runner.abandon(pending)
        raise


def _write_filenames(directory: str, fol: _Folder) -> None:
    """``filenames.json``: the folder's classes and, per row, [path below the folder, label]."""
    lines = ",\n  ".join(json.dumps([r, lab]) for r, lab in zip(fol.rel, fol.labels))
    text = (f'{{"root": {json.dumps(fol.root)},\n "classes": {json.dumps(list(fol.classes))},\n'
            f' "files": [\n  {lines}\n ]\n}}\n')
    _write_text_if_changed(os.path.join(directory, FILENAMES), text)



def _hash_input(inp: _Input, progress: bool) -> None:
    """SHA-256 of the whole input file; also verifies the CRC-32 of a stored images member."""
    if inp.sha256 is not None:
        return
    from tqdm.auto import tqdm

    m = inp.member
    crc_lo = crc_hi = None
    if not m.compressed:
        crc_lo = m.data_offset - m.header_len
        crc_hi = crc_lo + m.zinfo.compress_size
    h, crc, pos = hashlib.sha256(), 0, 0
    total = os.path.getsize(inp.path)
    bar = tqdm(total=total, unit="B", unit_scale=True, leave=False,
               desc=f"{inp.dataset}: checksum", disable=not progress)
    with open(inp.path, "rb") as f, bar:
        while True:
            b = f.read(_IO_BLOCK)
            if not b:
                break
            h.update(b)
            if crc_lo is not None:
                lo, hi = max(crc_lo, pos), min(crc_hi, pos + len(b))
                if lo < hi:
                    crc = crc32(memoryview(b)[lo - pos:hi - pos], crc)
            pos += len(b)
            bar.update(len(b))
    if crc_lo is not None and crc != m.zinfo.CRC:
        raise ValueError(f"{inp.path}: {inp.split}_images fails its CRC-32 check: the file is "
                         f"damaged; download it again")
    inp.sha256 = h.hexdigest()


# ================================================================================ worker tasks
@dataclass(frozen=True)
class _Task:
    """Rows ``[r0, r1)`` of one output file: picklable, sent to workers."""

    dataset: str
    corruption: str
    seed: int
    r0: int
    r1: int
    segments: tuple          # ((severity, lo, hi), ...): input rows per severity
    image_shape: tuple
    source: _FileRef | None  # None: images are passed along with the task
    compress: bool
    zarr_store: str | None = None
    zarr_array: str | None = None
    out_path: str | None = None   # stored npz written by the worker at out_offset
    out_offset: int = 0


#: In a pool worker, the pid of the process running ``generate`` (set by :func:`_init_worker`).
_PARENT = None
#: In a pool worker, the read end of a pipe whose only write end that process holds (set by
#: :func:`_init_worker`; None outside pool workers).
_PARENT_PIPE = None


def _parent_gone() -> bool:
    """In a pool worker, whether the process running ``generate`` is gone.

    Its pipe (:data:`_PARENT_PIPE`) reads as end-of-file once it has exited, even killed with
    SIGKILL and not yet reaped by whoever started it: ``os.kill(pid, 0)`` still finds such a
    zombie, and workers lived on for as long as it stayed one (for ever under a caller that
    reads the output to its end before waiting, as ``proc.kill(); proc.communicate()`` does:
    the workers held the inherited pipes). The pid test remains for a pipe that a fork of
    that process keeps open.
    """
    if _PARENT_PIPE is not None:
        try:
            if _PARENT_PIPE.poll():  # nothing is ever sent: readable means end-of-file
                return True
        except (OSError, EOFError):
            return True
    if _PARENT is not None:
        try:
            os.kill(_PARENT, 0)
        except ProcessLookupError:
            return True
        except OSError:  # EPERM: alive (or its pid reused by another user's process)
            pass
    return False


def _check_parent() -> None:
    """In a pool worker, raise RuntimeError if the process running ``generate`` is gone.

    Called before a worker creates a file: after ``kill -9`` of that process a worker may
    still pick up a task already queued before :func:`_exit_with` ends it (at once through the
    pipe; within a second through the pid check), and a re-run may by then have removed the
    temporary files; a file created after that stayed behind.
    """
    if _parent_gone():
        raise RuntimeError(f"the process running generate is gone (pid {_PARENT}): "
                           f"this worker starts no more tasks")


def _init_worker(parent: int | None = None, pipe=None) -> None:  # pragma: no cover - in workers
    """Process-pool initializer: one thread per worker; Ctrl-C is the parent's to handle; the
    worker exits as soon as the process ``parent`` (the one running ``generate``) is gone, even
    when it was killed with SIGKILL and could not shut the pool down (workers are the fork
    server's children, so they would otherwise outlive it) and has not been reaped yet, and
    creates no file once it is gone (:func:`_check_parent`). ``pipe``: the read end of a pipe
    whose write end ``parent`` holds (:func:`_parent_gone`): its end-of-file is seen at once;
    the pid check, within a second, covers a fork of ``parent`` keeping that end open."""
    global _PARENT, _PARENT_PIPE
    from .api import set_num_threads

    _PARENT, _PARENT_PIPE = parent, pipe
    set_num_threads(1)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
    if parent is not None:
        import threading

        threading.Thread(target=_exit_with, daemon=True,
                         name="medmnistc_fast-parent-watch").start()


def _exit_with() -> None:  # pragma: no cover - runs in worker processes
    import time

    while not _parent_gone():
        if _PARENT_PIPE is None:
            time.sleep(1.0)
        else:
            try:
                _PARENT_PIPE.poll(1.0)   # returns at once at end-of-file
            except (OSError, EOFError):
                pass
    os._exit(1)


def _warm_worker(calls) -> None:  # pragma: no cover - runs in worker processes
    """Load the kernels (Numba caches, tables) of ``calls``, (dataset, corruption, shape)
    triples, by corrupting a blank image of ``shape`` at level 1: a worker's first task then
    does not pay for it. Best effort: a failure here is left for the real task to report."""
    for dataset, corruption, shape in calls:
        try:
            corrupt(np.zeros(shape, np.uint8), corruption, 1, dataset=dataset)
        except Exception:  # noqa: BLE001 - the task itself raises it, with its context
            pass


def _compute(task: _Task, *images):
    """Corrupt the rows of ``task``; returns ``(payload, crc32, raw bytes, digests)``.

    ``payload`` is the C-order uint8 array (stored npz), deflate segments (compressed npz) or
    None (zarr: written here, into the task's own chunk). ``digests`` is the concatenation of
    per-image SHA-256 digests for zarr, else None.
    """
    parts = []
    for j, (sev, lo, hi) in enumerate(task.segments):
        imgs = images[j] if images else task.source.read(lo, hi)
        parts.append(corrupt_batch(imgs, task.corruption, sev, dataset=task.dataset,
                                   seed=task.seed, start=lo, num_threads=1))
    out = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if task.zarr_store is not None:
        import zarr

        arr = zarr.open_array(store=task.zarr_store, path=task.zarr_array, mode="r+")
        arr[task.r0:task.r1] = out
        digests = b"".join(hashlib.sha256(np.ascontiguousarray(row).data).digest()
                           for row in out)
        return None, 0, out.nbytes, digests
    view = memoryview(out).cast("B")
    crc = crc32(view)
    if task.out_path is not None:
        fd = os.open(task.out_path, os.O_WRONLY)
        try:
            done = 0
            while done < view.nbytes:
                done += os.pwrite(fd, view[done:], task.out_offset + done)
        finally:
            os.close(fd)
        return None, crc, out.nbytes, None
    payload = deflate_segments(out) if task.compress else out
    return payload, crc, out.nbytes, None


#: Rough cost of writing one output image, relative to a colour lookup table (1.0): kernel time at
#: 224 px (benchmarks/RESULTS.md, corruption table) plus about 0.35 ms of hashing and writing.
#: Only orders whole-file tasks (longest first); never affects any output.
_RELATIVE_COST = {"motion_blur": 3.0, "zoom_blur": 5.0, "saturate": 2.9, "jpeg_compression": 2.2,
                  "defocus_blur": 1.6, "gaussian_noise": 1.3, "speckle_noise": 1.3,
                  "shot_noise": 1.3, "gaussian_blur": 1.2, "bubble": 1.3}


@dataclass(frozen=True)
class _FileTask:
    """A whole stored ``.npz`` output file, written by one pool worker (picklable)."""

    dataset: str
    corruption: str
    seed: int
    severities: tuple
    source: _FileRef
    chunk: int
    split: str
    labels: np.ndarray
    path: str                # the temporary file to create


def _write_file(task: _FileTask) -> tuple:
    """Write ``task``'s file: images severity-major, then labels; returns (sha256 hex, bytes).

    The bytes equal those of the chunked paths (a stored member is its data in order,
    whatever the chunking).
    """
    _check_parent()
    src = task.source
    rows = len(task.severities) * src.n
    # One input and one output buffer for the whole file: fresh ones per chunk would be new
    # pages for the kernel to map (about as costly as a cheap corruption on a VM).
    shape = (min(task.chunk, src.n),) + tuple(src.image_shape)
    images, corrupted = np.empty(shape, np.uint8), np.empty(shape, np.uint8)
    with open(task.path, "wb") as f, open(src.path, "rb", buffering=0) as fin:
        w = NpzWriter(f)
        w.begin_member(f"{task.split}_images", (rows,) + tuple(src.image_shape), np.uint8)
        for sev in task.severities:
            for lo in range(0, src.n, task.chunk):
                hi = min(src.n, lo + task.chunk)
                w.write(corrupt_batch(src.read(lo, hi, images, fin), task.corruption, sev,
                                      dataset=task.dataset, seed=task.seed, start=lo,
                                      num_threads=1, out=corrupted[: hi - lo]))
        w.end_member()
        w.add_array(f"{task.split}_labels", task.labels)
        sha, nbytes = w.close()
        f.flush()
        _sync_and_uncache(f.fileno())
    return sha, nbytes


class _Done:
    """A future-like wrapper that computes on ``result()`` (the in-process runner)."""

    def __init__(self, fn, args):
        self._fn, self._args = fn, args

    def result(self):
        return self._fn(*self._args)

    def cancel(self):
        return True


class _LocalRunner:
    inband = False
    direct_write = False
    whole_files = 0          # > 0: pool workers that can each write whole files
    capacity = 1

    def submit(self, task, images):
        return _Done(_compute, (task,) + tuple(images))

    def call(self, fn, *args):
        return _Done(fn, args)

    def abandon(self, futures) -> None:
        """Give up ``futures`` (an error or Ctrl-C): nothing to do, they compute on ``result()``."""

    def close(self, cancel=False):
        pass


#: CPython before 3.11.5 keeps this process's read end of a ProcessPoolExecutor's call queue
#: open when the pool breaks (fixed by gh-94777 in 3.11.5 and 3.12); _PoolRunner.close works
#: around it.
_LEAVES_CALL_QUEUE_READER_OPEN = sys.version_info < (3, 11, 5)


class _PoolRunner:
    inband = False
    # Workers pwrite stored npz chunks straight into the (local) temporary file.
    direct_write = hasattr(os, "pwrite")

    def __init__(self, workers: int, warm=()):
        """Start ``workers`` processes now, in a background thread.

        They start (and load the kernels of ``warm``, see :func:`_warm_worker`) while this
        process goes on checking and unpacking the input, instead of after it. With the fork
        server, workers fork from a server that imported this module once, rather than each
        importing NumPy, Numba and the package (about 0.4 s each).
        """
        import multiprocessing as mp
        import threading
        from concurrent.futures import ProcessPoolExecutor

        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["__main__", __name__])  # no effect once it runs
        # This process holds the write end (the fork server and spawned workers do not inherit
        # it; a child this process forks later does, and the pid check covers that case); the
        # workers get the read end (_parent_gone).
        self._alive_r, self._alive_w = ctx.Pipe(duplex=False)
        self._ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                       initializer=_init_worker,
                                       initargs=(os.getpid(), self._alive_r))
        self.capacity = 2 * workers + 1
        self.whole_files = workers
        self._starter = threading.Thread(target=self._start, args=(workers, tuple(warm)),
                                         name="medmnistc_fast-pool-start", daemon=True)
        self._starter.start()

    def _start(self, workers: int, warm: tuple) -> None:
        # One warm-up call per worker: each submit made while the others are still starting
        # spawns a process (ProcessPoolExecutor spawns on demand).
        for _ in range(workers):
            try:
                self._ex.submit(_warm_worker, warm)
            except RuntimeError:  # shut down meanwhile (an error or Ctrl-C in the parent)
                return
            except Exception:  # noqa: BLE001 - spawning failed (OSError: fork limit, a dead
                # multiprocessing helper...): the first real submit fails the same way and
                # generate reports it; a traceback from this thread would only add noise.
                return

    def submit(self, task, images):
        return self._ex.submit(_compute, task, *images)

    def call(self, fn, *args):
        return self._ex.submit(fn, *args)

    def abandon(self, futures) -> None:
        """Give up ``futures`` (an error or Ctrl-C; :meth:`close` with ``cancel=True`` follows).

        Nothing is done to them here: ``close(cancel=True)`` has the executor cancel the queued
        tasks. Cancelling them one by one left cancelled futures in the executor's table, and
        when the pool broke next (close terminates the workers; ``kill -TERM`` of the process
        group or the OOM killer ends them first), Python 3.10 and 3.11's
        ``ProcessPoolExecutor`` stopped its manager thread with InvalidStateError (setting
        BrokenProcessPool on a cancelled future) before it closed the call queue: the
        interpreter's exit then waited for ever on the queue's feeder thread, blocked writing a
        task's images into a pipe that no worker read (3 of about 40 interrupted runs of
        ``generate --sample --workers 3 --compress`` hung so).
        """

    def close(self, cancel=False):
        self._starter.join()
        if cancel:
            # Interrupted: stop the workers now rather than after their current task (a whole
            # file can take minutes); what they were writing is a temporary file, removed here
            # or on the next run. ProcessPoolExecutor has no public way to do this before
            # Python 3.14 (terminate_workers), hence its process table.
            if _LEAVES_CALL_QUEUE_READER_OPEN:
                self._unblock_call_queue()
            for proc in list((getattr(self._ex, "_processes", None) or {}).values()):
                try:
                    proc.terminate()
                except (OSError, ValueError, AttributeError):
                    pass
            # A worker stopped while sending its result leaves part of a message in the result
            # pipe: the executor's manager thread waited in recv() for the rest, and shutdown
            # below for it, for ever. With this process's copy of the pipe's write end closed
            # (the manager only reads), the dead workers' ends make an end-of-file: the recv
            # fails and the executor treats the pool as broken and winds down.
            writer = getattr(getattr(self._ex, "_result_queue", None), "_writer", None)
            if writer is not None:
                writer.close()
        self._ex.shutdown(wait=True, cancel_futures=cancel)
        self._alive_w.close()
        self._alive_r.close()

    def _unblock_call_queue(self) -> None:
        """Let the call queue's feeder thread fail instead of hang once the workers are gone.

        The feeder may be blocked writing a task larger than a pipe's buffer to workers that
        are stopped: this process's copy of the pipe's read end (it only writes there) keeps
        the pipe open, and the executor's wind-down, then the interpreter's exit, wait for the
        feeder for ever. CPython before 3.11.5 never drops that copy (gh-94777). It is pointed
        at /dev/null here, before the workers are stopped, while nothing else closes it: the
        feeder closes it only after the executor closes the queue, which it does once the pool
        is broken or shut down. A pool broken already (a worker died on its own) is given
        0.5 s to wind down first; it stays up past that only while the feeder is blocked, and a
        blocked feeder closes nothing. What is left is a window of microseconds: a worker dying
        on its own just as this runs, or a feeder unblocked just as the 0.5 s run out.
        """
        manager = getattr(self._ex, "_executor_manager_thread", None)
        if getattr(self._ex, "_broken", False) and manager is not None:
            manager.join(timeout=0.5)
            if not manager.is_alive():
                return
        _detach_pipe_end(getattr(getattr(self._ex, "_call_queue", None), "_reader", None))


def _detach_pipe_end(conn) -> None:
    """Drop this process's reference to the pipe behind ``conn``, a multiprocessing Connection,
    without closing ``conn``: its descriptor is pointed at /dev/null (POSIX only; nothing is
    done to a closed one).

    Once no process holds the read end, a write blocked on the pipe fails with EPIPE. ``conn``
    keeps owning its descriptor, and whichever thread closes it later (the queue's feeder on
    its sentinel, the executor) closes it once. The caller makes sure no other thread closes
    ``conn`` meanwhile: ``dup2`` onto a number closed and reused in between would point
    another file at /dev/null.
    """
    if conn is None or os.name != "posix" or conn.closed:
        return
    try:
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return
    try:
        os.dup2(null, conn.fileno(), inheritable=False)
    except (OSError, ValueError):  # closed meanwhile
        pass
    finally:
        os.close(null)


def _worker_environment() -> dict:  # also runs on Dask workers
    return {"medmnistc_fast": __version__, **byte_environment()}


def _environment_error(workers: list) -> DaskEnvironmentError:
    """The error for ``workers``: one ``"address: differences"`` line per differing worker."""
    return DaskEnvironmentError(
        "the Dask workers must run the versions of this process, or the outputs would mix "
        "bytes of different setups; differing (worker value, then this process's): "
        + "; ".join(workers))


def _compute_checked(environment: dict, task: _Task, *images):
    """:func:`_compute` on a Dask worker, after checking that the worker runs the versions
    ``environment`` of the process running :func:`generate` (:class:`DaskEnvironmentError`
    otherwise). The start-up check sees only the workers present then; this one also covers
    workers that join later (adaptive clusters, replaced workers). About 4 us a task."""
    mine = _worker_environment()
    if mine != environment:
        try:
            from dask.distributed import get_worker

            where = get_worker().address
        except (ImportError, ValueError):  # not inside a Dask worker
            where = f"pid {os.getpid()}"
        raise _environment_error([f"{where} (joined after the start-up check): "
                                  f"{', '.join(_environment_diff(mine, environment))}"])
    return _compute(task, *images)


def _check_scheduler_file(path: str) -> None:
    """ValueError naming ``scheduler`` unless the file ``path`` holds what ``dask scheduler
    --scheduler-file`` writes: a JSON object with a str ``"address"``. dask.distributed's Client
    read a damaged one as an AssertionError (``assert ip is not None``) or a TypeError from its
    own code. Read up to 10 times over about half a second, as the scheduler may be writing it
    (the Client itself retries 10 times)."""
    import time

    for attempt in range(10):
        try:
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
        except ValueError as exc:  # not JSON (yet), or not UTF-8
            why = f"not JSON ({exc})"
        else:
            address = cfg.get("address") if isinstance(cfg, dict) else None
            if isinstance(address, str) and address:
                return
            why = f"no str \"address\": {' '.join(_dumps(cfg).split())[:80]}"
        if attempt < 9:
            time.sleep(0.05)
    raise ValueError(f"scheduler must be a scheduler address (tcp://host:8786) or a scheduler "
                     f"file: a JSON object with an \"address\", as `dask scheduler "
                     f"--scheduler-file FILE` writes; {path} holds {why}")


class _DaskRunner:
    inband = True
    direct_write = False
    whole_files = 0

    def __init__(self, scheduler):
        try:
            from dask.distributed import Client
        except ImportError as exc:
            raise missing_extra("scheduler= / --scheduler", "dask.distributed", "dask",
                                exc) from None
        if isinstance(scheduler, (str, os.PathLike)):
            scheduler = os.fspath(scheduler)
            if scheduler.endswith(".json") and os.path.isfile(scheduler):
                client = Client(scheduler_file=scheduler)   # `dask scheduler --scheduler-file`
            else:
                client = Client(scheduler)
            self.client, self._own = client, True
        else:
            self.client, self._own = scheduler, False
        self._environment = _worker_environment()
        try:
            self._check_workers(self.client.run(_worker_environment))
        except BaseException:
            self.close()
            raise
        nthreads = sum(self.client.nthreads().values()) or 1
        self.capacity = 2 * nthreads + 2

    @staticmethod
    def _check_workers(reported: dict) -> None:
        """Refuse a cluster whose workers (``{address: environment}``) would write other bytes
        than this process: another medmnistc_fast or another :func:`byte_environment`."""
        mine = _worker_environment()
        bad = [f"{addr}: {', '.join(_environment_diff(env, mine))}"
               for addr, env in sorted(reported.items()) if env != mine]
        if bad:
            raise _environment_error(bad)

    def submit(self, task, images):
        # Small inputs travel inside the task; large ones are scattered first (a round trip),
        # which keeps task messages under Dask's large-graph warning threshold.
        if images and sum(a.nbytes for a in images) > _DASK_INLINE_BYTES:
            images = self.client.scatter(list(images), hash=False)
        return self.client.submit(_compute_checked, self._environment, task, *images, pure=False)

    def abandon(self, futures) -> None:
        """Give up ``futures`` (an error or Ctrl-C): the cluster drops their tasks."""
        for fut in futures:
            fut.cancel()

    def close(self, cancel=False):
        if self._own:
            self.client.close()


# ================================================================================== file system
def _sync_and_uncache(fd: int) -> None:
    """fsync a finished output file, then drop its (now clean) pages from the page cache.

    A full run writes hundreds of GB that nobody reads back soon: kept cached, they would
    evict everything else and make the kernel find fresh memory for every new page (on a VM
    that can cost more than the corruption). No effect on tmpfs, where the pages are the file.
    """
    os.fsync(fd)
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:  # advisory only
            pass


def _clean_temps(directory: str) -> list:
    removed = []
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if _tmp_target(name) is not None:
                _remove(os.path.join(directory, name))
                removed.append(name)
    return removed


def _dumps(obj) -> str:
    """JSON with one item per line, but lists of numbers or strings kept on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[[^\[\]{}]*\]", lambda m: " ".join(m.group(0).split()), text)


def _write_text_if_changed(path: str, text: str) -> None:
    """Write ``text`` atomically unless ``path`` holds it already: re-running a finished
    command writes nothing, so it also succeeds on a read-only copy of the output."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except (OSError, ValueError):  # missing or unreadable (ValueError: not UTF-8): rewrite
        pass
    _write_text_atomic(path, text)


def _write_json_atomic(path: str, obj) -> None:
    _write_text_if_changed(path, _dumps(obj) + "\n")


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(_IO_BLOCK)
            if not b:
                return h.hexdigest()
            h.update(b)


def _fsync_tree(path: str) -> None:
    for dirpath, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(dirpath)


# ==================================================================================== manifests
def _jsonable(x):
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _table(dataset: str, corruption: str, severities: tuple) -> list:
    t = severity_table(dataset, corruption)
    return [_jsonable(t[s - 1]) for s in severities]


def byte_environment() -> dict:
    """Versions of the libraries the output bytes depend on, besides this package's own.

    Pillow encodes and decodes JPEG (through its bundled libjpeg-turbo), rasterises the bubble
    and stain_deposit ellipses and renders the characters' glyphs (through FreeType, with its
    bundled font; Pillow 11 and 12 draw them differently); SciPy's ``ndtr`` and ``pdtr`` build
    the noise laws' tables; NumPy does the array arithmetic around the kernels. Recorded in
    every manifest (``environment``): a resumed run, and every worker of a Dask cluster, must
    report the same, so that no output mixes the bytes of two setups.

    Returns
    -------
    dict of str to str
        ``pillow``, ``libjpeg_turbo``, ``freetype2``, ``scipy``, ``numpy``: version strings
        (``"none"`` for a Pillow feature that is not built in).
    """
    import PIL
    import scipy
    from PIL import features

    def feature(name: str) -> str:
        return str(features.version(name) or "none")

    return {"pillow": PIL.__version__, "libjpeg_turbo": feature("libjpeg_turbo"),
            "freetype2": feature("freetype2"), "scipy": scipy.__version__,
            "numpy": np.__version__}


def _environment_diff(old, new: dict) -> list:
    """``["pillow='12.1.0' (now '13.0.0')", ...]`` for the entries where ``old`` (a recorded
    environment) differs from ``new``."""
    old = old if isinstance(old, dict) else {}
    return [f"{k}={old.get(k)!r} (now {v!r})" for k, v in new.items() if old.get(k) != v]


def _params(inp: _Input, seed: int, fmt: str, compress: bool) -> dict:
    return {"format_version": _MANIFEST_VERSION, "generator": MANIFEST_GENERATOR,
            "version": __version__, "environment": byte_environment(), "dataset": inp.dataset,
            "size": inp.size, "split": inp.split, "seed": seed, "format": fmt,
            "compression": ("deflate-1" if fmt == "npz" else "zarr-default") if compress
            else "none", "input": inp.record()}


_COMPARED = ("format_version", "generator", "version", "dataset", "size", "split", "seed",
             "format", "compression")


def _param_diff(old: dict, new: dict) -> list:
    diffs = [f"{k}={old.get(k)!r} (now {new[k]!r})" for k in _COMPARED if old.get(k) != new[k]]
    if "environment" in old:  # manifests written before it was recorded are not compared
        diffs += _environment_diff(old["environment"], new["environment"])
    # a damaged manifest may hold any JSON there: a non-dict is "no input recorded" (a diff),
    # not an AttributeError that even --overwrite could not get past
    oi, ni = old.get("input"), new["input"]
    oi = oi if isinstance(oi, dict) else {}
    for k in ("sha256", "n"):
        if oi.get(k) != ni.get(k):
            diffs.append(f"input {k}={oi.get(k)!r} (now {ni.get(k)!r})")
    return diffs


def _load_manifest(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (FileNotFoundError, NotADirectoryError):  # none there (or no folder to hold one)
        return None
    except (OSError, ValueError):
        return {}  # unreadable: treat as foreign
    return m if isinstance(m, dict) else {}


def _out_name(corruption: str, fmt: str) -> str:
    return f"{corruption}.{fmt}"


def _verify_zarr(path: str, split: str, entry: dict) -> bool:
    try:
        import zarr

        g = zarr.open_group(store=path, mode="r")
        imgs, labs = g[f"{split}_images"], g[f"{split}_labels"]
        if list(imgs.shape) != entry["images"]["shape"]:
            return False
        tree = hashlib.sha256()
        step = max(1, int(entry.get("chunk_rows", 256)))
        for lo in range(0, imgs.shape[0], step):
            for row in np.ascontiguousarray(imgs[lo:lo + step]):
                tree.update(hashlib.sha256(row.data).digest())
        lab = np.ascontiguousarray(labs[...])
        return (tree.hexdigest() == entry["images_sha256"]
                and hashlib.sha256(lab.data).hexdigest() == entry["labels_sha256"])
    except Exception:  # noqa: BLE001 - any failure to read means "redo this file"
        return False


def _entry_matches(directory: str, inp: _Input, fmt: str, entry, want: dict) -> bool:
    if not isinstance(entry, dict):
        return False
    for k, v in want.items():
        if entry.get(k) != v:
            return False
    path = os.path.join(directory, want["file"])
    if fmt == "npz":
        return (os.path.isfile(path) and os.path.getsize(path) == entry.get("bytes")
                and _sha256_file(path) == entry.get("sha256"))
    return os.path.isdir(path) and _verify_zarr(path, inp.split, entry)


# ======================================================================================== jobs
@dataclass
class _Job:
    corruption: str
    severities: tuple
    rows: int
    name: str
    final: str
    tmp: str
    want: dict
    chunk: int
    state: dict = field(default_factory=dict)


class _DatasetRun:
    """Generates the requested files of one dataset (see :func:`generate`)."""

    def __init__(self, inp, out, corruptions, severities, seed, fmt, compress, chunk_size,
                 overwrite, progress):
        self.inp, self.fmt, self.compress = inp, fmt, compress
        self.seed, self.severities, self.progress = seed, severities, progress
        self.corruptions = corruptions
        self.dir = output_dir(out, inp.dataset, inp.split)
        self.manifest_path = os.path.join(self.dir, MANIFEST)
        self.params = _params(inp, seed, fmt, compress)
        per = int(np.prod(inp.image_shape))
        if chunk_size is not None and chunk_size * per > _INFLIGHT_BYTES:
            # Up to 2 x workers + 1 chunks are in flight: a larger one would void the bound on
            # memory (and one chunk alone could exhaust it).
            raise ValueError(f"chunk_size must be at most {_INFLIGHT_BYTES // per} rows for "
                             f"{inp.dataset}'s {per:,}-byte images ({_INFLIGHT_BYTES >> 20} MiB "
                             f"a chunk); got {chunk_size}")
        self.chunk = chunk_size if chunk_size is not None else _default_chunk(per)
        self.overwrite = overwrite
        self.files = {}
        self.jobs = []
        self.skipped = []
        self.spool = None

    # -- planning (no writes) -------------------------------------------------------------
    def check_existing(self) -> None:
        """Refuse to clobber outputs made with other parameters (unless ``overwrite``)."""
        old = _load_manifest(self.manifest_path)
        self.old = old
        if old is None:
            if self.overwrite:
                return
            clash = [c for c in self.corruptions
                     if os.path.exists(os.path.join(self.dir, _out_name(c, self.fmt)))]
            if clash:
                raise ValueError(f"{self.dir} already holds {', '.join(clash)} without a "
                                 f"{MANIFEST} from medmnistc-fast; pass --overwrite "
                                 f"(overwrite=True) to replace them, or choose another --out")
            return
        if not old and not self.overwrite:
            raise ValueError(f"{self.manifest_path} is not a medmnistc-fast manifest (unreadable "
                             f"or foreign); pass --overwrite (overwrite=True) to start over, or "
                             f"choose another --out")
        diffs = _param_diff(old, self.params)
        files = old.get("files") if isinstance(old.get("files"), dict) else {}
        for c in self.corruptions:
            entry = files.get(c)
            if isinstance(entry, dict) and entry.get("severities") not in (
                    None, list(self.severities)):
                diffs.append(f"{c} holds severities {entry['severities']}, "
                             f"requested {list(self.severities)}")
        if diffs and not self.overwrite:
            raise ValueError(f"{self.dir} holds outputs made with other parameters: "
                             f"{'; '.join(diffs)}. Pass --overwrite (overwrite=True) to "
                             f"replace them, or choose another --out")

    def plan(self) -> None:
        old = self.old if isinstance(self.old, dict) else {}
        same = bool(old) and not _param_diff(old, self.params)
        old_files = old.get("files", {}) if same and isinstance(old.get("files"), dict) else {}
        for c in registry.TABLES[self.inp.dataset]:
            if c not in self.corruptions:
                if c in old_files:
                    self.files[c] = old_files[c]       # kept as is (not requested this time)
                continue
            want = {"file": _out_name(c, self.fmt), "severities": list(self.severities),
                    "table": _table(self.inp.dataset, c, self.severities)}
            if self.fmt == "zarr":
                want["chunk_rows"] = self.chunk
            if _entry_matches(self.dir, self.inp, self.fmt, old_files.get(c), want):
                self.files[c] = old_files[c]
                self.skipped.append(c)
                continue
            rows = len(self.severities) * self.inp.n
            self.jobs.append(_Job(c, self.severities, rows, want["file"],
                                  os.path.join(self.dir, want["file"]),
                                  _tmp_name(self.dir, want["file"]), want, self.chunk))

    def write_side_files(self) -> None:
        """``filenames.json`` for a folder input; a stale one of an earlier folder run goes."""
        path = os.path.join(self.dir, FILENAMES)
        if self.inp.folder is not None:
            _write_filenames(self.dir, self.inp.folder)
        elif (isinstance(self.old, dict) and isinstance(self.old.get("input"), dict)
              and self.old["input"].get("source") == "folder" and os.path.isfile(path)):
            _remove(path)

    def write_manifest(self) -> None:
        order = list(registry.TABLES[self.inp.dataset])
        files = {c: self.files[c] for c in order if c in self.files}
        _write_json_atomic(self.manifest_path, dict(self.params, files=files))

    # -- running ------------------------------------------------------------------------------
    def prepare_source(self, get_runner) -> None:
        inp = self.inp
        if inp.array is not None:
            return
        if inp.folder is not None:
            # Decode every image once, in the workers (in-process under Dask, whose workers may
            # not see the folder), into a raw file that the corruption tasks then read.
            runner = get_runner()
            self.spool = _tmp_name(self.dir, f"input-{inp.split}")
            _decode_folder(inp, self.spool, _LocalRunner() if runner.inband else runner,
                           self.chunk, self.progress)
            inp.ref = _FileRef(self.spool, 0, inp.n, inp.image_shape)
            return
        m = inp.member
        if not m.compressed:
            inp.ref = _FileRef(inp.path, m.data_offset, inp.n, inp.image_shape)
            return
        from tqdm.auto import tqdm

        self.spool = _tmp_name(self.dir, f"input-{inp.split}")
        with open(self.spool, "wb") as f:
            class _W:
                def __init__(s, bar):
                    s.bar = bar

                def write(s, b):
                    f.write(b)
                    s.bar.update(len(b))

            with tqdm(total=m.nbytes, unit="B", unit_scale=True, leave=False,
                      desc=f"{inp.dataset}: unpack input", disable=not self.progress) as bar:
                copy_member_data(inp.path, m, _W(bar))
        inp.ref = _FileRef(self.spool, 0, inp.n, inp.image_shape)

    def tasks(self, runner):
        inp = self.inp
        per = int(np.prod(inp.image_shape))
        for job in self.jobs:
            yield job, None                                  # open marker
            for r0 in range(0, job.rows, job.chunk):
                r1 = min(job.rows, r0 + job.chunk)
                segs = []
                for k in range(r0 // inp.n, (r1 - 1) // inp.n + 1):
                    lo, hi = max(r0, k * inp.n) - k * inp.n, min(r1, (k + 1) * inp.n) - k * inp.n
                    segs.append((job.severities[k], lo, hi))
                direct = runner.direct_write and self.fmt == "npz" and not self.compress
                yield job, _Task(inp.dataset, job.corruption, self.seed, r0, r1, tuple(segs),
                                 inp.image_shape, None if runner.inband or inp.ref is None
                                 else inp.ref, self.compress,
                                 job.tmp if self.fmt == "zarr" else None,
                                 f"{inp.split}_images" if self.fmt == "zarr" else None,
                                 job.tmp if direct else None,
                                 job.state.get("data_start", 0) + r0 * per if direct else 0)

    def warm_calls(self) -> list:
        """(dataset, corruption, shape) of this run's jobs on a 16 px image, for
        :func:`_warm_worker`."""
        shape = (16, 16) + tuple(self.inp.image_shape[2:])
        return [(self.inp.dataset, job.corruption, shape) for job in self.jobs]

    def labels_for(self, job) -> np.ndarray:
        return np.tile(self.inp.labels, (len(job.severities), 1))  # labels are (N, L)

    def open_job(self, job) -> None:
        shape = (job.rows,) + self.inp.image_shape
        split = self.inp.split
        if self.fmt == "npz":
            f = open(job.tmp, "w+b")
            w = NpzWriter(f)
            w.begin_member(f"{split}_images", shape, np.uint8, self.compress)
            f.flush()
            job.state = {"f": f, "w": w, "done": 0, "data_start": w.position}
            return
        import zarr

        g = zarr.open_group(store=job.tmp, mode="w")
        labels = self.labels_for(job)
        kw = {} if self.compress else ({"compressors": None} if hasattr(g, "create_array")
                                        else {"compressor": None})
        make = g.create_array if hasattr(g, "create_array") else g.create_dataset  # zarr 3 | 2
        make(f"{split}_images", shape=shape, chunks=(job.chunk,) + self.inp.image_shape,
             dtype="uint8", fill_value=0, **kw)
        la = make(f"{split}_labels", shape=labels.shape, chunks=labels.shape,
                  dtype=labels.dtype, fill_value=0, **kw)
        la[...] = labels
        g.attrs.update({"generator": MANIFEST_GENERATOR, "version": __version__,
                        "dataset": self.inp.dataset, "corruption": job.corruption,
                        "severities": list(job.severities), "seed": self.seed,
                        "split": split, "size": self.inp.size,
                        "layout": "severity-major: rows [k*N:(k+1)*N] = severities[k]"})
        job.state = {"tree": hashlib.sha256(), "done": 0,
                     "labels_sha256": hashlib.sha256(labels.data).hexdigest()}

    def consume(self, job, result) -> None:
        payload, crc, raw_len, digests = result
        st = job.state
        if self.fmt == "npz":
            if payload is None:            # a worker wrote the chunk into the file itself
                st["w"].adopt(raw_len, crc)
            else:
                st["w"].write_chunk(payload, crc, raw_len)
        else:
            st["tree"].update(digests)
        st["done"] += raw_len

    def seal_job(self, job):
        """Finish writing ``job`` (main thread); returns the commit to run in the background."""
        st, split = job.state, self.inp.split
        shape = [job.rows] + list(self.inp.image_shape)
        labels = self.labels_for(job)
        job.state = {}
        if self.fmt == "npz":
            w, f = st["w"], st["f"]
            w.end_member()
            w.add_array(f"{split}_labels", labels, self.compress)
            sha, nbytes = w.close()
            f.flush()
            entry = self.npz_entry(job, sha, nbytes, labels)
            return lambda: self.commit_job(job, entry, f)
        entry = dict(job.want, rows=job.rows,
                     images={"shape": shape, "dtype": "uint8"},
                     labels={"shape": list(labels.shape), "dtype": labels.dtype.str},
                     images_sha256=st["tree"].hexdigest(), labels_sha256=st["labels_sha256"])
        return lambda: self.commit_job(job, entry, None)

    def npz_entry(self, job, sha: str, nbytes: int, labels: np.ndarray) -> dict:
        """The manifest entry of a finished ``.npz`` file."""
        split = self.inp.split
        shape = [job.rows] + list(self.inp.image_shape)
        return dict(job.want, sha256=sha, bytes=nbytes, rows=job.rows,
                    arrays={f"{split}_images": {"shape": shape, "dtype": "uint8"},
                            f"{split}_labels": {"shape": list(labels.shape),
                                                "dtype": labels.dtype.str}})

    def use_whole_files(self, runner) -> bool:
        """Whether pool workers write whole files: stored npz from a file source, and at least
        two files per worker (fewer files would leave workers idle: chunks are used then)."""
        return (runner.whole_files > 0 and self.fmt == "npz" and not self.compress
                and self.inp.ref is not None and len(self.jobs) >= 2 * runner.whole_files)

    def run_whole_files(self, runner, bar) -> None:
        """Each job is one task that a worker writes and fsyncs completely; finished files are
        renamed and recorded here, in completion order (the manifest is ordered by table)."""
        from concurrent.futures import FIRST_COMPLETED, wait

        inp = self.inp
        pending = {}
        # Longest files first (list scheduling): a slow file started last would leave the other
        # workers idle at the end. Bytes and manifest do not depend on the order.
        jobs = sorted(self.jobs, key=lambda j: -_RELATIVE_COST.get(j.corruption, 1.0) * j.rows)
        try:
            for job in jobs:
                labels = self.labels_for(job)
                task = _FileTask(inp.dataset, job.corruption, self.seed, job.severities,
                                 inp.ref, job.chunk, inp.split, labels, job.tmp)
                pending[runner.call(_write_file, task)] = (job, labels)
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    job, labels = pending.pop(fut)
                    sha, nbytes = fut.result()
                    self.commit_job(job, self.npz_entry(job, sha, nbytes, labels), None)
                    bar.update(job.rows)
                    bar.set_postfix_str(job.corruption, refresh=False)
        except BaseException:
            runner.abandon(list(pending))
            for job, _ in pending.values():
                _remove(job.tmp)
            raise

    def commit_job(self, job, entry, f) -> None:
        """fsync, rename into place, record in the manifest.

        ``f``: the open ``.npz`` file, fsynced and closed here; None for a zarr store (fsynced
        here) or a file a pool worker already wrote and fsynced.
        """
        try:
            if f is not None:
                _sync_and_uncache(f.fileno())
                f.close()
                f = None
                os.replace(job.tmp, job.final)
            else:
                if os.path.isdir(job.tmp):
                    _fsync_tree(job.tmp)
                if os.path.exists(job.final):
                    _remove(job.final)
                os.replace(job.tmp, job.final)
        except BaseException:
            if f is not None:
                f.close()
            _remove(job.tmp)
            raise
        _fsync_dir(self.dir)
        self.files[job.corruption] = entry
        self.write_manifest()

    def abort_job(self, job) -> None:
        f = job.state.get("f")
        if f is not None:
            f.close()
        _remove(job.tmp)
        job.state = {}

    def run(self, runner, bar) -> None:
        """Submit the tasks of every job (bounded in flight), write results in order.

        Files are sealed in this thread and committed (fsync, rename, manifest) by one
        background thread, so workers keep busy while the disk catches up.
        """
        from concurrent.futures import ThreadPoolExecutor

        if self.use_whole_files(runner):
            return self.run_whole_files(runner, bar)
        inp = self.inp
        # Bounded in flight: by the runner (2 per worker) and by bytes (results and, with Dask,
        # inputs travel through the parent).
        chunk_bytes = self.chunk * int(np.prod(inp.image_shape))
        capacity = min(runner.capacity, max(2, _INFLIGHT_BYTES // max(1, chunk_bytes)))
        pending = deque()
        opened = []
        commits = deque()
        it = self.tasks(runner)
        exhausted = False
        committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medmnistc_fast-commit")
        try:
            while True:
                while not exhausted and len(pending) < capacity:
                    nxt = next(it, None)
                    if nxt is None:
                        exhausted = True
                        break
                    job, task = nxt
                    if task is None:
                        self.open_job(job)
                        opened.append(job)
                        continue
                    images = ()
                    if task.source is None:
                        images = tuple(inp.read(lo, hi) for _, lo, hi in task.segments)
                    pending.append((job, task, runner.submit(task, images)))
                while commits and commits[0].done():
                    commits.popleft().result()          # re-raise a failed commit here
                if not pending:
                    break
                job, task, fut = pending.popleft()
                self.consume(job, fut.result())
                bar.update(task.r1 - task.r0)
                bar.set_postfix_str(job.corruption, refresh=False)
                if task.r1 == job.rows:
                    opened.remove(job)
                    commits.append(committer.submit(self.seal_job(job)))
            while commits:
                commits.popleft().result()
        except BaseException:
            runner.abandon([fut for _, _, fut in pending])
            for job in opened:
                self.abort_job(job)
            raise
        finally:
            committer.shutdown(wait=True)


# ==================================================================================== generate
def generate(dataset, out, *, root=None, sample: bool = False, sample_n: int = SPLIT_IMAGES,
             folder=None, images=None, labels=None, size: int | None = None,
             split: str = "test", corruptions=None, severities=None, seed: int = 0,
             workers: int | None = None, scheduler=None, fmt: str = "npz",
             compress: bool = False, chunk_size: int | None = None, overwrite: bool = False,
             progress: bool = False) -> list:
    """Generate corrupted sets: one file per (dataset, corruption).

    Four inputs, one per call: MedMNIST+ files (``root``, the default), the embedded sample
    (``sample=True``), an image folder (``folder``) or arrays (``images`` and ``labels``).
    The last two take any dataset key, including the pathology suites, and any image size.

    Parameters
    ----------
    dataset : str or sequence of str
        A dataset key: one of :data:`medmnistc_fast.DATASETS`, or with ``folder`` / ``images``
        also a pathology suite (``"pathology96"``, ``"pathology224"``) or ``"pathology"``,
        which picks the suite from the image size with
        :func:`~medmnistc_fast.corruptions.pathology.suite_for_size` (96 px tables up to
        160 px, 224 px tables above). For MedMNIST+ files and the sample also ``"all"``, a
        sequence of flags, or a comma-separated str.
    out : str or path
        Output root; files go to ``{out}/{dataset}/{corruption}.npz`` (test split) or
        ``{out}/{dataset}_{split}/`` (other splits). Created if needed.
    root : str or path, optional
        Folder of the MedMNIST+ files (``{flag}.npz`` at 28 px, ``{flag}_{size}.npz`` else).
        Default :data:`DEFAULT_ROOT` (``~/.medmnist``) when no other input is given.
    sample : bool
        Use the embedded sample (:func:`medmnistc_fast.sample.sample_split`: real images from
        scikit-image and pydicom, colour for RGB datasets, gray otherwise) instead of files.
    sample_n : int >= 1
        Images per split of the sample, with ``sample_n * size * size * channels`` at most
        4 GiB (:data:`medmnistc_fast.sample.MAX_BYTES`).
    folder : str or path, optional
        An image folder: one sub-folder per class, ``{folder}/{class}/{image}``. Classes are
        the immediate sub-folders sorted by name (hidden ones, starting with ".", skipped);
        the label of an image is its class's index in that order. Images are the files of
        each class folder (not recursive) ending in .png, .jpg, .jpeg, .tif or .tiff (any
        case), sorted by name; other entries (hidden ones aside) are skipped with a
        UserWarning naming them, and so are non-image files directly under ``folder`` (a
        README, a labels file). An image directly under ``folder`` (a class folder passed
        instead of its parent, or a misplaced image), an
        empty class folder, a broken symbolic link (directly under ``folder``, or named as an
        image), an unreadable image, an image of more than 8 bits per channel
        (16-bit, 32-bit or float) or of another size than the first image (H, W >= 8) is an
        error, raised before anything is written. Images are decoded with Pillow (first frame
        of multi-page files; no EXIF rotation) and converted with ``.convert("RGB")`` for RGB
        datasets (alpha dropped), ``.convert("L")`` otherwise. Labels are ``(N, 1)`` uint8
        (int64 beyond 256 classes). ``{out}/{dataset}/filenames.json`` maps rows to files.
    images : ndarray, shape (N, H, W, 3) for RGB datasets or (N, H, W) for gray, uint8
        In-memory (or memory-mapped) images, H, W >= 8; read in chunks, never copied whole.
        Needs ``labels``.
    labels : ndarray, shape (N,) or (N, L), L >= 1, integer or bool dtype
        Labels of ``images``, written tiled in their dtype; 1-D labels are written as
        ``(N, 1)`` (MedMNIST's layout).
    size : int >= 8, optional
        Image side of MedMNIST+ files and the sample (MedMNIST+: 28, 64, 128, 224; the sample:
        8..4096, :data:`medmnistc_fast.sample.MAX_SIZE`); default 224. Must be None with
        ``folder`` or ``images``, whose size is read from the input.
    split : {"test", "val", "train"}
        Split read from MedMNIST+ files and the sample; for every input it names the arrays
        (``{split}_images``) and the folder. Not part of the random key, which is (seed,
        dataset, corruption, severity, index) as for :func:`medmnistc_fast.corrupt`: under one
        ``seed`` image ``i`` of every split gets the same random draws; use a different
        ``seed`` per split to draw them independently.
    corruptions : sequence of str or comma-separated str, optional
        Subset of each dataset's corruptions (default: all, in the registry's order).
    severities : int in 1..5, sequence of them, or comma-separated str, optional
        Subset of levels (default all five); sorted and de-duplicated; a file then holds
        ``len(severities) * N`` rows, level ``severities[k]`` in rows ``[k*N:(k+1)*N]``.
    seed : int >= 0
        Random seed, passed to :func:`medmnistc_fast.corrupt_batch` with ``start`` = the
        image's index (row) in the input.
    workers : int in 1..1024 (:data:`MAX_WORKERS`), optional
        Worker processes on this machine (default: the CPUs this process may use, its
        affinity mask capped by a container's cgroup CPU quota). 1 runs in-process.
        Each worker runs one corruption thread (and decodes folder images). Workers import
        the main module: from a script read from standard input (``python -``) only 1 works
        (the default then), so save such a script to a file first; in a script, call
        ``generate`` under ``if __name__ == "__main__":`` (a call the workers reach while
        importing it raises RuntimeError there, and so does the script's own call).
    scheduler : str or dask.distributed.Client, optional
        Run the chunk tasks on a Dask distributed cluster: a scheduler address such as
        ``"tcp://host:8786"``, the path of a ``--scheduler-file`` JSON written by
        ``dask scheduler``, or a client. Images are sent to the workers with each task
        (folder images are decoded in this process first); with ``fmt="zarr"`` the workers
        write the store, so ``out`` must be on a file system they share. Excludes ``workers``.
    fmt : {"npz", "zarr"}
    compress : bool
        npz: deflate (zlib level 1) members in the workers; zarr: zarr's default compressor.
        Default False (stored; see the module notes for the measurements behind it).
        Compressed file bytes (and so the manifest's checksums) also depend on the zlib or
        compressor build, which :func:`byte_environment` does not record: machines with other
        builds give the same arrays in differently compressed files.
    chunk_size : int >= 1, optional
        Rows per task (and zarr chunk rows), at most 1 GiB of images (7,133 rows at 224 px
        RGB). Default: about 8 MiB of images, clamped to 16..1024 rows. Output bytes of npz
        files do not depend on it.
    overwrite : bool
        Replace outputs made with other parameters or without a manifest. The manifest is then
        started afresh: files of the earlier run that are not regenerated stay on disk but are
        no longer listed.
    progress : bool
        Show tqdm progress bars on stderr.

    Returns
    -------
    list of dict
        One per dataset: ``dataset`` (the suite chosen for ``"pathology"``), ``dir``,
        ``written`` and ``skipped`` (corruption names), ``removed_temps`` and ``manifest``
        (the manifest's content).

    Raises
    ------
    FileNotFoundError
        A MedMNIST+ file or the image folder is missing (for MedMNIST+ the message says how to
        get it and mentions ``--sample``; it names instead the dataset's files of other sizes
        in ``root``, or ``root`` itself when that is a file), or ``scheduler`` names a
        ``.json`` scheduler file that does not exist.
    ValueError
        Unknown dataset, corruption or severity; an empty (``''``) ``out``, ``root``,
        ``folder`` or ``scheduler``; more than one input; ``out`` the same folder as
        ``folder``, a new folder inside it, or the folder holding ``folder`` under the
        output folder's name (``{out}/{flag}`` would be ``folder``); ``seed`` negative,
        ``sample_n`` or ``chunk_size`` below 1, ``chunk_size`` over 1 GiB of images, ``size``
        below 8 (above 4096 for the sample) or given with ``folder`` / ``images``,
        ``workers`` outside 1..1024 or given with ``scheduler``; unknown ``split`` or ``fmt``;
        a damaged or malformed input (not a zip, missing arrays, wrong dtype or shape, CRC
        error; for a folder, see ``folder``); outputs made with other
        parameters without ``overwrite``; ``workers`` > 1 from a script read from standard
        input; a ``scheduler`` file (``.json``) that holds no scheduler address (not JSON,
        or no str ``"address"``). Inputs are all checked before anything is written.
    TypeError
        Arguments of the wrong type (``dataset`` None or not a str or sequence of str; a
        mapping as ``dataset``, ``corruptions`` or ``severities``;
        ``out``, ``root`` or ``folder`` not a str or os.PathLike, ``sample``, ``compress``,
        ``overwrite`` or ``progress`` not a bool, ``seed``, ``sample_n``, ``size``,
        ``workers`` or ``chunk_size`` not an int (bools included), ``split`` not a str, a ``corruptions`` or
        ``severities`` item of the wrong type, ``images`` not uint8,
        ``labels`` not integers (or bools), ``images`` or ``labels`` a masked array, one of
        ``images`` and ``labels`` without the other, ``scheduler`` neither a str,
        an os.PathLike nor a client).
    ImportError
        ``fmt="zarr"`` without zarr, ``scheduler`` without dask.distributed.
    DaskEnvironmentError
        (a RuntimeError) A Dask worker runs another medmnistc_fast or other library versions
        (:func:`byte_environment`) than this process: nothing is written when it is among the
        workers present at the start; a worker that joins later fails its first task (files
        finished before stay, complete, and a re-run resumes).
    WorkerDiedError
        (a RuntimeError) A pool worker died (``workers`` > 1): a script that calls
        ``generate`` without the ``__main__`` guard, or a worker killed by the operating
        system (out of memory). Files finished before stay complete, and a dataset folder
        this call created in which nothing finished is removed.
    OSError
        Writing fails (a full disk, a read-only folder); an error that names no file (ENOSPC)
        names the output folder. Files finished before it stay complete, so a re-run resumes.

    Notes
    -----
    Memory stays bounded whatever the dataset size: images are read in chunks (a deflated
    input member is first unpacked, and the images of a folder decoded once by the workers,
    to a temporary raw file beside the outputs), at most ``2 * workers + 1`` chunks are in
    flight, and members are written by streaming.
    """
    _check_not_bootstrapping()
    check_folder(out, "out")
    sample, compress = _check_bool(sample, "sample"), _check_bool(compress, "compress")
    overwrite, progress = _check_bool(overwrite, "overwrite"), _check_bool(progress, "progress")
    for value, name in ((root, "root"), (folder, "folder")):
        if value is not None:
            check_folder(value, name)
    n_inputs = ((root is not None) + bool(sample) + (folder is not None)
                + (images is not None or labels is not None))
    if n_inputs > 1:
        raise ValueError("pass one input: root= (MedMNIST+ files, --root), sample=True "
                         "(--sample), folder= (--from-folder) or images= with labels=")
    if folder is not None:
        _check_out_beside_folder(out, folder)
    single = folder is not None or images is not None or labels is not None
    if (images is None) != (labels is None):  # before the checks that assume both
        raise TypeError("images= and labels= go together: pass both arrays")
    if single:
        key = _single_input_dataset(dataset)
        datasets = [key]
        if size is not None:
            raise ValueError("size= (--size) does not apply to folder= (--from-folder) or "
                             "images= input: the image size is read from the images")
    else:
        datasets = _resolve_datasets(dataset)
        # The sample's upper bound too, so that 7 and 5000 get the same range in the message.
        size = _check_int(224 if size is None else size, "size", 8,
                          SAMPLE_MAX_SIZE if sample else None)
    # The two pathology suites share their corruption names: check against either.
    wanted = _resolve_corruptions(
        ["pathology96" if d == PATHOLOGY_AUTO else d for d in datasets], corruptions)
    sevs = _resolve_severities(severities)
    seed = _check_int(seed, "seed", 0)
    sample_n = _check_int(sample_n, "sample_n", 1)
    if sample:
        from .sample import check_sample_shape

        for d in datasets:  # the bounds of sample_images, named as this function's arguments
            check_sample_shape(sample_n, size, registry.RGB[d], "sample_n")
    split = _check_split(split, allow_none=False)
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if chunk_size is not None:
        chunk_size = _check_int(chunk_size, "chunk_size", 1)
    if scheduler is not None and workers is not None:
        raise ValueError("pass either workers (local processes) or scheduler (a Dask cluster), "
                         "not both")
    if isinstance(scheduler, (str, os.PathLike)):
        if not check_path(scheduler, "scheduler", "scheduler file"):
            raise ValueError("scheduler must be a scheduler address (tcp://host:8786) or a "
                             "scheduler file (.json); got ''")
    elif scheduler is not None and not (callable(getattr(scheduler, "submit", None))
                                        and callable(getattr(scheduler, "nthreads", None))):
        raise TypeError(f"scheduler must be a scheduler address (str, e.g. 'tcp://host:8786'), "
                        f"the path of a scheduler file (.json) or a dask.distributed.Client; "
                        f"got {scheduler!r} ({type(scheduler).__name__})")
    if (isinstance(scheduler, (str, os.PathLike)) and os.fspath(scheduler).endswith(".json")
            and not os.path.isfile(scheduler)):
        raise FileNotFoundError(
            f"scheduler file not found: {os.fspath(scheduler)} (the file that `dask scheduler "
            f"--scheduler-file FILE` writes once it runs); start the scheduler first, or pass "
            f"its address (tcp://host:8786)")
    if isinstance(scheduler, (str, os.PathLike)) and os.fspath(scheduler).endswith(".json"):
        _check_scheduler_file(os.fspath(scheduler))
    if scheduler is None:
        workers = _resolve_workers(workers)
    if fmt == "zarr":
        try:
            import zarr  # noqa: F401
        except ImportError as exc:
            raise missing_extra("fmt='zarr' / --format zarr", "zarr", "zarr", exc) from None

    # 1. Check every input and every output folder before writing anything.
    if folder is not None:
        if datasets[0] != PATHOLOGY_AUTO:  # before the folder is scanned
            _check_output_dir_beside_folder(out, folder, datasets[0], split)
        inputs = [_open_folder_input(datasets[0], split, folder, progress)]
        if datasets[0] == PATHOLOGY_AUTO:  # the suite is known once the images are read
            _check_output_dir_beside_folder(out, folder, inputs[0].dataset, split)
    elif single:
        inputs = [_open_array_input(datasets[0], split, images, labels)]
    else:
        missing = [d for d in datasets if not wanted[d]]
        if missing:
            warnings.warn(f"{', '.join(missing)}: none of the requested corruptions apply "
                          f"({', '.join(_as_list(corruptions, 'corruptions'))}); skipped",
                          UserWarning, stacklevel=2)
        datasets = [d for d in datasets if wanted[d]]
        inputs = [_open_sample_input(d, split, size, sample_n) if sample
                  else _open_file_input(d, split, size, root) for d in datasets]
    if single:
        wanted = {inputs[0].dataset: next(iter(wanted.values()))}
    for inp in inputs:
        _hash_input(inp, progress)
    runs = [_DatasetRun(inp, out, wanted[inp.dataset], sevs, seed, fmt, compress, chunk_size,
                        overwrite, progress) for inp in inputs]
    for run in runs:
        run.check_existing()

    # 2. Generate.
    from tqdm.auto import tqdm

    results = []
    runner = None

    def get_runner(warm=()):
        nonlocal runner
        if runner is None:
            runner = (_DaskRunner(scheduler) if scheduler is not None
                      else _LocalRunner() if workers == 1 else _PoolRunner(workers, warm))
        return runner

    try:
        for run in runs:
            created = _first_missing(run.dir)
            try:
                os.makedirs(run.dir, exist_ok=True)
            except OSError as exc:
                why = ("a file of that name is in the way"
                       if os.path.exists(run.dir) and not os.path.isdir(run.dir)
                       else exc.strerror or exc)
                raise type(exc)(exc.errno, f"cannot create the output folder {run.dir!r} (out="
                                f"{os.fspath(out)!r}): {why}") from None
            with _dir_lock(run.dir), _naming_folder(run.dir):
                # Again under the lock: another run may have written here since step 1 (and
                # outside the try below: what it wrote must not be removed with the folder).
                run.check_existing()
                try:
                    removed = _clean_temps(run.dir)
                    run.plan()
                    if run.jobs:
                        # Pool workers start while the input is unpacked (below); a Dask
                        # cluster is reached and its versions checked before anything is
                        # written (a failure removes the folder made above).
                        get_runner(run.warm_calls())
                        run.prepare_source(get_runner)  # unpacks / decodes (and checks) the input
                except BaseException:
                    if run.spool is not None:
                        _remove(run.spool)
                    if created is not None:
                        _remove_created(run.dir, created)
                    raise
                run.write_side_files()
                run.write_manifest()
                if run.jobs:
                    try:
                        total = sum(j.rows for j in run.jobs)
                        with tqdm(total=total, unit="img", desc=run.inp.dataset,
                                  disable=not progress, dynamic_ncols=True) as bar:
                            run.run(get_runner(), bar)
                    except BaseException:
                        # A folder this run made, in which nothing finished, holds only its
                        # manifest: removed, as when the run fails before writing.
                        if created is not None and not run.files:
                            _remove_created(run.dir, created)
                        raise
                    finally:
                        if run.spool is not None:
                            _remove(run.spool)
                results.append({"dataset": run.inp.dataset, "dir": run.dir,
                                "written": [j.corruption for j in run.jobs],
                                "skipped": list(run.skipped), "removed_temps": removed,
                                "manifest": dict(run.params, files=run.files)})
    except BaseException as exc:
        if runner is not None:
            runner.close(cancel=True)
            runner = None
        from concurrent.futures.process import BrokenProcessPool

        if isinstance(exc, BrokenProcessPool):
            raise WorkerDiedError(
                f"a worker process of generate died ({exc}). In a script, call generate under "
                f"`if __name__ == '__main__':` (the workers re-run the script's top level, "
                f"where an unguarded call raises RuntimeError); otherwise the operating "
                f"system may have killed it (out of memory?). Files finished before stay, so "
                f"a re-run resumes") from exc
        raise
    finally:
        if runner is not None:
            runner.close()
    return results


# errnos of a failed write that name no file (disk full, quota, I/O error, read-only or stale
# file system, file too large)
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG,
                             errno.ESTALE})


@contextlib.contextmanager
def _naming_folder(directory: str):
    """Give an OSError that names no file (a write's ENOSPC or EIO, also from a worker) the
    output folder it happened in: "[Errno 28] No space left on device" alone did not say where.
    Only storage errors: a worker pool's "[Errno 111] Connection refused" (its processes could
    not start) read as a disk problem with the folder attached."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno in _STORAGE_ERRNOS:
            raise OSError(exc.errno, f"{exc.strerror}, writing in {directory}") from exc
        final = _output_of_temp(directory, exc.filename)
        if final is not None and exc.errno is not None:
            # "[Errno 13] Permission denied: 'out/flag/.bubble.npz.3f9c0a1b2d4e.tmp'" named a
            # file the user never asked for: name the output, as _fileio's JSON writes do
            raise type(exc)(exc.errno, f"cannot write {final!r}: {exc.strerror or exc}") from exc
        raise


def _output_of_temp(directory: str, filename):
    """The output file (``{directory}/{corruption}.npz`` or ``.zarr``) whose temporary file
    (``.{name}.{12 hex}.tmp``, or a path inside that zarr store) ``filename`` is, else None."""
    if not isinstance(filename, (str, os.PathLike)):
        return None
    rel = os.path.relpath(os.fspath(filename), directory)
    name = _tmp_target(rel.split(os.sep, 1)[0])
    return os.path.join(directory, name) if name and name.endswith((".npz", ".zarr")) else None


@contextlib.contextmanager
def _dir_lock(path: str):
    """Hold an exclusive lock on the output folder ``path`` during one dataset's run (``flock``
    on the folder itself: no lock file). A second run on the same folder stops at once instead
    of removing the first one's temporary files. Where folders cannot be locked (no ``fcntl``,
    some network file systems) runs go unlocked, as before.

    Raises
    ------
    ValueError
        Another run (of this or another process) holds the folder.
    """
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{path} is being written by another generate run (same --out "
                             f"and dataset); wait for it to finish or choose another --out"
                             ) from None
        except OSError:  # locking not supported on this file system
            pass
        yield
    finally:
        os.close(fd)


def _first_missing(path: str) -> str | None:
    """The outermost folder of ``path`` that does not exist yet (None if ``path`` exists)."""
    top, p = None, os.path.abspath(path)
    while not os.path.exists(p):
        top, parent = p, os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return top


def _remove_created(directory: str, top: str) -> None:
    """Undo a failed run's ``os.makedirs(directory)``, which created ``top`` and the folders
    below it: ``directory`` (this run's own, written only under its lock) goes with its
    content, the folders above it up to ``top`` only while empty. Another run may have started
    writing beside it meanwhile (``{out}/{other dataset}/`` while a Dask cluster was still
    timing out): ``shutil.rmtree(top)`` deleted that run's finished files."""
    shutil.rmtree(directory, ignore_errors=True)
    top = os.path.abspath(top)
    p = os.path.abspath(directory)
    while p != top and p.startswith(top + os.sep):
        p = os.path.dirname(p)
        try:
            os.rmdir(p)   # only if empty
        except OSError:
            return


# ================================================================================ image access
def load_images(dataset: str, lo: int = 0, hi: int | None = None, *, root=None,
                sample: bool = False, sample_n: int = SPLIT_IMAGES, size: int = 224,
                split: str = "test") -> np.ndarray:
    """Read images ``[lo, hi)`` of a split without loading the whole file.

    Parameters
    ----------
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` (the pathology suites have no MedMNIST+ files).
    root, sample, sample_n, size, split
        As in :func:`generate`.
    lo : int >= 0
        First row.
    hi : int >= lo, optional
        End of the row range, exclusive, at most the split's image count (``None``:
        ``lo + 1``).

    Returns
    -------
    ndarray, uint8, shape (hi - lo, size, size[, 3])

    Raises
    ------
    FileNotFoundError
        As in :func:`generate` (a missing MedMNIST+ file).
    TypeError
        ``dataset`` or ``split`` not a str; ``lo``, ``hi``, ``size`` or ``sample_n`` not an
        int; ``sample`` not a bool.
    ValueError
        Unknown ``dataset`` or ``split``; ``root`` with ``sample=True`` or ``''``; ``lo``
        negative; ``hi`` below ``lo`` or above the split's image count (so, with ``hi=None``,
        ``lo`` not below it; ``lo == hi ==`` the count gives an empty array); ``size`` below
        8 (or above 4096 for the sample); ``sample_n`` images of ``size`` beyond the sample's 4 GiB
        (:func:`medmnistc_fast.sample.check_sample_shape`); a damaged input file.
    """
    dataset = _single_dataset(dataset)
    size = _check_int(size, "size", 8)
    split = _check_split(split, allow_none=False)
    # sample="no" used to read the sample (a truthy str), and root= was then ignored
    if _check_bool(sample, "sample") and root is not None:
        raise ValueError("pass one input: root= (MedMNIST+ files) or sample=True")
    lo = _check_int(lo, "lo", 0)
    hi = lo + 1 if hi is None else _check_int(hi, "hi", lo)
    if sample:  # the bounds of sample_images, named as this function's arguments
        from .sample import check_sample_shape

        sample_n = check_sample_shape(_check_int(sample_n, "sample_n", 1), size,
                                      registry.RGB[dataset], "sample_n")[0]
    inp = (_open_sample_input(dataset, split, size, sample_n)
           if sample else _open_file_input(dataset, split, size, root))
    if hi > inp.n:  # "lo must" reads "--index must" on preview's command line (cli._FLAG_OF)
        what = f"lo must be below {inp.n}" if lo >= inp.n else f"hi must be at most {inp.n}"
        raise ValueError(f"{what}: the {split} split of {dataset} has {inp.n} images "
                         f"(0..{inp.n - 1}); got {lo if lo >= inp.n else hi}")
    if inp.array is not None:
        return inp.array[lo:hi].copy()
    m = inp.member
    if not m.compressed:
        return _FileRef(inp.path, m.data_offset, inp.n, inp.image_shape).read(lo, hi)
    import zipfile

    per = int(np.prod(inp.image_shape))
    out = np.empty((hi - lo,) + inp.image_shape, np.uint8)
    buf = memoryview(out).cast("B")
    with zipfile.ZipFile(inp.path) as zf, zf.open(m.zinfo) as fp:
        skip = m.header_len + lo * per
        while skip:
            skip -= len(fp.read(min(skip, _IO_BLOCK)))
        got = 0
        while got < buf.nbytes:
            b = fp.read(buf.nbytes - got)
            if not b:
                raise ValueError(f"{inp.path}: {split}_images is truncated")
            buf[got:got + len(b)] = b
            got += len(b)
    return out


_PREVIEW_PAD = 4
_PREVIEW_LABEL_W = 120
_PREVIEW_HEADER_H = 20
_PREVIEW_MIN_CELL = 96


def preview_cell(side: int) -> int:
    """Cell side of :func:`render_preview`: ``side * max(1, ceil(96 / side))`` pixels.

    Parameters
    ----------
    side : int >= 1
        The image's larger side, pixels.

    Returns
    -------
    int
        The smallest multiple of ``side`` that is at least 96 (``side`` itself above 96).

    Raises
    ------
    TypeError
        ``side`` not an int (bools and floats included).
    ValueError
        ``side`` below 1.
    """
    side = _check_int(side, "side", 1)
    return side * max(1, math.ceil(_PREVIEW_MIN_CELL / side))


def render_preview(image, dataset: str, *, seed: int = 0, index: int = 0, corruptions=None):
    """A grid of one image under each corruption of ``dataset`` at the five severities.

    Rows are corruptions (in the reference's order, or ``corruptions``); columns are the clean
    image and severities 1..5. Images are enlarged by an integer factor (nearest neighbour) to
    at least 96 px. Labels use Pillow's default font.

    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
    dataset : str
        Any dataset key, including the pathology suites.
    seed, index : int >= 0
        As in :func:`medmnistc_fast.corrupt` (``index``: the image's index in its split).
    corruptions : sequence of str or comma-separated str, optional
        Rows to draw, among ``medmnistc_fast.corruptions(dataset)`` (shown in that order);
        default all of them.

    Returns
    -------
    PIL.Image.Image, mode "RGB"
        Width ``120 + 6 * (c + 4) + 4`` and height ``20 + rows * (c + 4) + 4`` pixels, where
        ``c = preview_cell(max(H, W))``.

    Raises
    ------
    TypeError
        ``image`` not a uint8 ndarray (a masked array included); ``corruptions`` a mapping,
        bytes or a non-str item; otherwise as in :func:`medmnistc_fast.corrupt`.
    ValueError
        ``image`` of another shape, or under 8 pixels a side; ``corruptions`` empty or naming
        one that ``dataset`` does not define; otherwise as in :func:`medmnistc_fast.corrupt`.
    """
    from PIL import Image, ImageDraw, ImageFont

    dataset = check_dataset(dataset)
    names = _resolve_corruptions([dataset], corruptions)[dataset]
    image = as_hwc(image)  # checked as corrupt() checks it, before any drawing
    if image.shape[2] == 1:
        image = image[:, :, 0]
    side = max(image.shape[:2])
    factor = preview_cell(side) // side
    cell = side * factor
    pad = _PREVIEW_PAD
    width = _PREVIEW_LABEL_W + 6 * (cell + pad) + pad
    height = _PREVIEW_HEADER_H + len(names) * (cell + pad) + pad
    canvas = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()

    def tile(arr):
        im = Image.fromarray(arr).convert("RGB")
        return im.resize((arr.shape[1] * factor, arr.shape[0] * factor), Image.NEAREST)

    for j, title in enumerate(["clean"] + [f"severity {s}" for s in range(1, 6)]):
        x = _PREVIEW_LABEL_W + pad + j * (cell + pad)
        draw.text((x, 4), title, fill="black", font=font)
    clean = tile(image)
    for i, c in enumerate(names):
        y = _PREVIEW_HEADER_H + pad + i * (cell + pad)
        draw.text((pad, y + cell // 2 - 6), c, fill="black", font=font)
        canvas.paste(clean, (_PREVIEW_LABEL_W + pad, y))
        for s in range(1, 6):
            im = corrupt(image, c, s, dataset=dataset, seed=seed, index=index)
            canvas.paste(tile(im), (_PREVIEW_LABEL_W + pad + s * (cell + pad), y))
    return canvas

