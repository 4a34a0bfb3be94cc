"""Reading the corrupted test sets written by ``medmnistc-fast generate`` (and the reference).

Layout (the reference's ``DatasetManager``, kept by :mod:`medmnistc_fast.generate`)::

    {root}/{dataset}/{corruption}.npz     members test_images, test_labels
    {root}/{dataset}/{corruption}.zarr    (with --format zarr) arrays of the same names
    {root}/{dataset}/manifest.json        (optional; written by generate)

(``val_images`` / ``val_labels`` or ``train_...`` for ``generate --split val`` or ``train``.)
``test_images`` is uint8 ``(kN, H, W)``, ``(kN, H, W, 1)`` or ``(kN, H, W, 3)``,
``test_labels`` ``(kN, L)``
(``(kN,)`` is accepted too), severity-major: rows ``[j N, (j + 1) N)`` hold the j-th stored
level. The stored levels are those that ``generate --severities`` wrote, read from the zarr
group's ``severities`` attribute or from the file's entry in ``manifest.json``; without either
(the reference's files) all five, k = 5, rows ``[(s - 1) N, s N)`` holding severity ``s``. An
npz file of a level subset moved away from its manifest needs
``CorruptedSet.from_path(..., stored_severities=...)``: the file itself does not record them.

Arrays are opened lazily and memory-efficiently: an uncompressed (``ZIP_STORED``, the default
of ``np.savez`` and of ``generate``) ``.npz`` member is memory-mapped at its offset inside the
zip file, so nothing is read until an item is; a compressed (``np.savez_compressed``) member is
read whole on first use (per process); a zarr array reads one chunk per access. Opened arrays
are not pickled: a dataset sent to DataLoader workers (fork or spawn) reopens its files there.
"""
from __future__ import annotations

import json
import os
from typing import Iterable

import numpy as np

from . import registry
from ._npz import inspect_npz, read_member_array
from ._validation import (_is_int, check_corruption, check_dataset, check_path, missing_extra,
                          scalar_of)

__all__ = ["CorruptedSet", "TorchCorruptedSet", "available_corruptions", "folder_name",
           "IMAGES_KEY", "LABELS_KEY", "SPLITS", "MANIFEST_GENERATOR"]

#: Array names of the test split's files (the reference's ``DatasetManager``); a file of the
#: val or train split (``generate --split``) names them ``val_images`` etc.
IMAGES_KEY = "test_images"
LABELS_KEY = "test_labels"
#: MedMNIST splits, the prefixes of the array names.
SPLITS = ("test", "val", "train")
#: The ``generator`` field of every manifest ``generate`` writes: a ``manifest.json`` without
#: it is another tool's, and says nothing about which files are current.
MANIFEST_GENERATOR = "medmnistc_fast"

_FORMATS = ("auto", "npz", "zarr")


def folder_name(dataset: str, split: str = "test") -> str:
    """Folder of a dataset's files in a ``generate`` output: the flag for the test split (the
    reference's layout), ``{flag}_{split}`` for val and train.

    Parameters
    ----------
    dataset : str
        A dataset key (not checked against the registry: a folder input's dataset name
        works too).
    split : {"test", "val", "train"}, default "test"

    Returns
    -------
    str
        ``dataset`` for the test split, ``f"{dataset}_{split}"`` otherwise (a name, not a path).

    Raises
    ------
    TypeError
        ``dataset`` not a str (any non-empty dataset key is accepted), ``split`` not a str.
    ValueError
        ``dataset`` empty, ``split`` not one of "test", "val", "train".
    """
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str; got {dataset!r} ({type(dataset).__name__})")
    if not dataset:
        raise ValueError("dataset must be a non-empty str; got ''")
    split = _check_split(split, allow_none=False)  # None ("the file's own") has no folder
    return dataset if split == "test" else f"{dataset}_{split}"


def _zarr():
    try:
        import zarr
    except ImportError as exc:
        raise missing_extra("reading .zarr corrupted sets", "zarr", "zarr", exc) from None
    return zarr


def _open_npz_member(path: str, name: str, members: dict):
    info = members.get(name)
    if info is None:
        raise ValueError(f"{path} has no array {name!r}; it has: "
                         f"{', '.join(map(repr, members)) or 'none'}")
    if info.dtype.hasobject:
        raise ValueError(f"{path}: array {name!r} holds Python objects; refusing to load it "
                         "(allow_pickle=False)")
    if info.compressed:
        arr = read_member_array(path, info)
        # read once per process and shared by every item and arrays() call: read-only, like
        # the memory map of a stored member, so that no caller can change what later reads see
        arr.setflags(write=False)
    elif info.nbytes == 0:
        arr = np.empty(info.shape, info.dtype)
    else:
        arr = np.memmap(path, dtype=info.dtype, mode="r", offset=info.data_offset,
                        shape=info.shape, order="F" if info.fortran_order else "C")
    return arr


def _check_split(split, allow_none: bool = True):
    """``split`` checked: one of :data:`SPLITS`, or None (the file's own) if ``allow_none``."""
    if split is None and allow_none:
        return None
    own = " or None (the file's own)" if allow_none else ""
    if not isinstance(split, str):
        raise TypeError(f"split must be a str, one of {', '.join(map(repr, SPLITS))}{own}; got "
                        f"{split!r} ({type(split).__name__})")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}{own}; got "
                         f"{split!r}")
    return split


def _file_split(path: str, names, split) -> str:
    """The split whose ``{split}_images`` and ``{split}_labels`` the file holds: ``split`` if
    given, else the only one present ("test" when several are)."""
    present = [s for s in SPLITS if f"{s}_images" in names and f"{s}_labels" in names]
    if split is None:
        if len(present) == 1 or "test" in present:
            return present[0]
        want = f"{IMAGES_KEY} and {LABELS_KEY}"
    elif split in present:
        return split
    else:
        want = f"{split}_images and {split}_labels"
    raise ValueError(f"{path} has no arrays {want}; it has: "
                     f"{', '.join(map(repr, names)) or 'none'}"
                     + (f" (pass split={present[0]!r})" if present and split is None else ""))


def _open_arrays(path: str, fmt: str, split: str):
    """(images, labels) array-likes of the ``split`` arrays of the file at ``path``."""
    if fmt == "npz":
        members = inspect_npz(path)
        return (_open_npz_member(path, f"{split}_images", members),
                _open_npz_member(path, f"{split}_labels", members))
    group = _zarr().open_group(path, mode="r")
    return group[f"{split}_images"], group[f"{split}_labels"]


def _describe(path: str, fmt: str, split) -> tuple:
    """(split, images shape, images dtype, labels shape) from headers only (nothing
    decompressed); ``split`` None: the file's own (:func:`_file_split`)."""
    if fmt == "npz":
        members = inspect_npz(path)
        split = _file_split(path, list(members), split)
        im, lb = members[f"{split}_images"], members[f"{split}_labels"]
        return split, tuple(im.shape), np.dtype(im.dtype), tuple(lb.shape)
    split = _file_split(path, list(_zarr().open_group(path, mode="r").array_keys()), split)
    images, labels = _open_arrays(path, fmt, split)
    return split, tuple(images.shape), np.dtype(images.dtype), tuple(labels.shape)


def _format_of(path: str, fmt: str) -> str:
    """The storage format of ``path``: ``fmt`` if given, else zarr for a directory or a
    ``.zarr`` name, else npz. Raises ValueError for a directory read as npz, a file read as
    zarr, or a directory without zarr group metadata (``.zgroup`` v2, ``zarr.json`` v3)."""
    is_dir = os.path.isdir(path)
    if fmt == "auto":
        fmt = "zarr" if path.endswith(".zarr") or is_dir else "npz"
    if fmt == "npz" and is_dir:
        raise ValueError(f"{path!r} is a directory; format='npz' needs an .npz file")
    if fmt == "zarr" and os.path.exists(path):
        if not is_dir:
            raise ValueError(f"{path!r} is a file; format='zarr' needs a zarr directory store")
        if not any(os.path.exists(os.path.join(path, m)) for m in (".zgroup", "zarr.json")):
            raise ValueError(f"{path!r} is a directory without zarr group metadata (.zgroup or "
                             f"zarr.json); not a corrupted-set store")
    return fmt


def _manifest_files(folder: str):
    """The ``files`` of the generate manifest in ``folder`` (``{corruption: entry}``), or None:
    no manifest, or an unreadable or foreign one (the reference writes none; another tool's
    ``manifest.json``, even with a ``files`` mapping of its own, has no ``generator`` field
    equal to :data:`MANIFEST_GENERATOR`)."""
    try:
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as fh:
            m = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(m, dict) or m.get("generator") != MANIFEST_GENERATOR:
        return None
    files = m.get("files")
    return files if isinstance(files, dict) else None


def _dataset_folder_hint(root: str, sub: str) -> str:
    """``""`` unless ``root`` is itself a dataset folder of a generate run (it holds a generate
    manifest) and not the output folder holding ``sub``: then a hint to pass its parent."""
    if os.path.isdir(os.path.join(root, sub)) or _manifest_files(root) is None:
        return ""
    return (f"; {root!r} holds a generate manifest, so it is a dataset folder itself: pass the "
            f"generate --out folder, which holds {sub}/")


def _other_split_hint(root: str, dataset: str, corruption: str, split: str) -> str:
    """``""`` unless another split's folder (``generate --split``) holds ``corruption``: then a
    hint naming the ``split=`` that opens it (a set generated with ``--split val`` was opened
    without ``split="val"`` and the message said only "present: none")."""
    found = [s for s in SPLITS if s != split
             and any(os.path.exists(os.path.join(root, folder_name(dataset, s), corruption + ext))
                     for ext in (".npz", ".zarr"))]
    if not found:
        return ""
    return "; " + ", ".join(f"{folder_name(dataset, s)}/ holds {corruption}: pass split={s!r}"
                            for s in found)


def _manifest_entry(path: str):
    """The entry of ``manifest.json`` (beside ``path``) whose ``file`` is ``path``'s name, or
    None: no manifest, an unreadable or foreign one, or no entry for that file."""
    folder, name = os.path.split(os.path.abspath(path))
    files = _manifest_files(folder) or {}
    return next((e for e in files.values() if isinstance(e, dict) and e.get("file") == name),
                None)


def _valid_levels(levels) -> bool:
    return (isinstance(levels, (list, tuple)) and len(levels) > 0
            and all(_is_int(v) and 1 <= v <= registry.N_SEVERITIES for v in levels)
            and list(levels) == sorted(set(levels)))


def _stored_levels(path: str, fmt: str, rows: int, recorded_only: bool = False):
    """The levels stored in the file of ``rows`` rows, in row order: the zarr group's
    ``severities`` attribute, else the manifest entry's ``severities`` (if the entry's ``rows``
    match the file's), else all five (files of the reference; None with ``recorded_only``)."""
    if fmt == "zarr":
        levels = _zarr().open_group(path, mode="r").attrs.get("severities")
        if _valid_levels(levels):
            return tuple(int(v) for v in levels)
    entry = _manifest_entry(path)
    if (entry is not None and _valid_levels(entry.get("severities"))
            and entry.get("rows", rows) == rows):
        return tuple(int(v) for v in entry["severities"])
    return None if recorded_only else tuple(range(1, registry.N_SEVERITIES + 1))


def _check_severities(severity, stored=None) -> tuple:
    """The selected levels: ``severity`` checked against the ``stored`` ones (default 1..5)."""
    stored = tuple(range(1, registry.N_SEVERITIES + 1)) if stored is None else stored
    allowed = f"an int in 1..{registry.N_SEVERITIES}, a sequence of them, or None (all)"
    if severity is None:
        return stored
    values = (severity,) if _is_int(severity) else severity
    if (isinstance(values, (str, bytes, set, frozenset, dict))
            or not isinstance(values, Iterable)):
        raise TypeError(f"severity must be {allowed}; got {severity!r}")
    values = tuple(values)
    if not values:
        raise ValueError(f"severity must be {allowed}; got an empty sequence")
    for v in values:
        if not _is_int(v):
            raise TypeError(f"severity must be {allowed}; got {severity!r}")
        if not 1 <= int(v) <= registry.N_SEVERITIES:
            raise ValueError(f"severity must be {allowed}; got {severity!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"severity must not repeat a level; got {severity!r}")
    missing = [int(v) for v in values if int(v) not in stored]
    if missing:
        raise ValueError(f"severity must be one of the levels stored in this file: "
                         f"{', '.join(map(str, stored))} (it was generated with --severities "
                         f"{','.join(map(str, stored))}); got {severity!r}")
    return tuple(int(v) for v in values)


def available_corruptions(root, dataset: str, split: str = "test") -> tuple:
    """The corruptions of ``dataset`` that have a file under ``root`` (``.npz`` or ``.zarr``).

    Parameters
    ----------
    root : str or os.PathLike
        The ``generate`` output folder (holding ``{dataset}/``, or ``{dataset}_{split}/``);
        a leading ``~`` is expanded, as ``generate`` expands it in ``out``.
    dataset : str
        A dataset name of :data:`medmnistc_fast.registry.TABLES`.
    split : {"test", "val", "train"}, default "test"
        Which split's folder (:func:`folder_name`).

    Returns
    -------
    tuple of str
        In the reference's order (``medmnistc_fast.corruptions(dataset)``); empty when the
        dataset's folder under ``root`` holds none or does not exist (``root`` itself must).
        When the folder has a ``generate`` manifest, only the
        corruptions it lists, and only if the file it names is there: files that an
        ``--overwrite`` run with other parameters did not regenerate stay on disk, and would mix
        runs (seeds, sizes) in one evaluation (the same files :class:`CorruptedSet` opens).

    Raises
    ------
    FileNotFoundError
        ``root`` is not a folder, or is a dataset folder of a generate run (it holds a
        generate ``manifest.json`` and no ``{dataset}/`` folder) instead of the output folder.
    TypeError
        ``root`` is not a str or os.PathLike; ``split`` not a str.
    ValueError
        Unknown ``dataset`` or ``split``.
    """
    dataset = check_dataset(dataset)
    root = check_path(root, "root")
    sub = folder_name(dataset, _check_split(split) or "test")
    if not os.path.isdir(root):
        raise FileNotFoundError(f"root {root!r} is not a folder (expected the generate output "
                                f"folder holding {sub}/)")
    folder = os.path.join(root, sub)
    hint = _dataset_folder_hint(root, sub)
    if hint:
        raise FileNotFoundError(f"no folder {sub}/ under {root!r}{hint}")
    listed = _manifest_files(folder)

    def present(c):
        if listed is None:
            return any(os.path.exists(os.path.join(folder, c + ext)) for ext in (".npz", ".zarr"))
        # the file the manifest names (a stale file of the other format does not count)
        entry = listed.get(c)
        name = entry.get("file") if isinstance(entry, dict) else None
        return isinstance(name, str) and os.path.exists(os.path.join(folder, name))

    return tuple(c for c in registry.TABLES[dataset] if present(c))


class CorruptedSet:
    """One corrupted test set: ``(image, label)`` items, all severities or a selection.

    Parameters
    ----------
    root : str or os.PathLike
        The ``generate`` output folder (a leading ``~`` expanded, as ``generate`` expands it
        in ``out``); the file is ``{root}/{dataset}/{corruption}.npz`` or
        ``.zarr`` (``{root}/{dataset}_{split}/...`` for ``split="val"`` or ``"train"``): with ``format="auto"`` the one that the folder's ``manifest.json`` lists
        (an ``--overwrite`` run in the other format leaves the older file on disk), else npz
        when both exist. Use :meth:`from_path` for a file elsewhere.
    dataset : str
        A dataset name (:data:`medmnistc_fast.DATASETS` or a pathology suite key).
    corruption : str
        One of ``medmnistc_fast.corruptions(dataset)``.
    severity : int, sequence of int, or None
        Levels to expose (1..5, among the stored ones), in the given order; None: every stored
        level (severity-major order).
    format : {"auto", "npz", "zarr"}
        File format; "auto": see ``root``.
    split : {"test", "val", "train"} or None
        The split written by ``generate --split``: its folder and arrays. None: the test
        split's folder, and the file's own arrays (its only split, or "test").

    Attributes
    ----------
    n_per_severity : int
        N, the number of clean test images.
    stored_severities : tuple of int
        The levels the file holds, in row order: the ``severities`` of its ``manifest.json``
        entry or zarr attributes (``generate --severities``), else (1, 2, 3, 4, 5).
    severities : tuple of int
        The selected levels.
    image_shape : tuple of int
        ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)``, as stored.
    split : str
        The split whose arrays are read.
    path : str

    Notes
    -----
    ``len(cs) == N * len(severities)``; item ``i`` is sample ``i % N`` at level
    ``severities[i // N]`` (file row ``stored_severities.index(level) * N + i % N``) and
    ``cs[i]`` returns ``(image, label)``: a new writable uint8 ndarray of shape
    ``image_shape`` and the label row (``(L,)``, or ``()`` for 1-D labels; the file's dtype).
    Negative indices count from the end; TypeError for a non-int index (0-d integer arrays and
    tensors count as ints, as ``torch.utils.data.Subset(ds, torch.tensor([...]))`` passes
    them), IndexError beyond ``len(cs)``.
    :meth:`arrays` gives whole arrays (memory-mapped slices when possible).

    Raises
    ------
    FileNotFoundError
        No file for the corruption under ``root`` (the message lists those present, and
        names the ``split=`` whose folder holds it, if another does).
    ValueError, TypeError
        Unknown names, bad ``root``, ``severity`` (including a level the file does not hold),
        ``format`` or ``split``; a file without the split's arrays, or whose arrays do not
        have the layout above; a file that the folder's ``generate`` manifest does not list
        (left by an earlier run, as :func:`available_corruptions` leaves it out; open it
        with :meth:`from_path`).
    ImportError
        A ``.zarr`` store without zarr installed.
    """

    def __init__(self, root, dataset: str, corruption: str, *, severity=None,
                 format: str = "auto", split=None):
        dataset = check_dataset(dataset)
        corruption = check_corruption(dataset, corruption)
        if format not in _FORMATS:
            raise ValueError(f"format must be one of {', '.join(map(repr, _FORMATS))}; "
                             f"got {format!r}")
        root = check_path(root, "root")
        split = _check_split(split)
        folder = os.path.join(root, folder_name(dataset, split or "test"))
        candidates = {"npz": os.path.join(folder, corruption + ".npz"),
                      "zarr": os.path.join(folder, corruption + ".zarr")}
        order = ("npz", "zarr") if format == "auto" else (format,)
        if format == "auto":
            # the manifest names the file of the latest run (another format's may remain)
            listed = [f for f in order if _manifest_entry(candidates[f]) is not None]
            order = tuple(listed) + tuple(f for f in order if f not in listed)
        path = next((candidates[f] for f in order if os.path.exists(candidates[f])), None)
        if path is None:
            present = (available_corruptions(root, dataset, split or "test")
                       if os.path.isdir(folder) else ())
            raise FileNotFoundError(
                f"no corrupted set for {dataset}/{corruption} under {os.fspath(root)!r} "
                f"(looked for {' and '.join(candidates[f] for f in order)}); present: "
                f"{', '.join(present) or 'none'}"
                f"{_dataset_folder_hint(root, folder_name(dataset, split or 'test'))}"
                f"{_other_split_hint(root, dataset, corruption, split or 'test')}")
        listed = _manifest_files(folder)
        if listed is not None and _manifest_entry(path) is None:
            raise ValueError(
                f"{path} is not listed in {os.path.join(folder, 'manifest.json')}: a file that "
                f"a later generate run (--overwrite with other corruptions) did not make, or "
                f"one still being written; its seed and parameters are unknown. Listed: "
                f"{', '.join(listed) or 'none'}. CorruptedSet.from_path opens it anyway")
        self.dataset, self.corruption = dataset, corruption
        self._init(path, _format_of(path, format), severity, split)

    @classmethod
    def from_path(cls, path, *, severity=None, format: str = "auto",
                  split=None, stored_severities=None) -> "CorruptedSet":
        """Open a corrupted-set file anywhere (``.npz`` or ``.zarr``); names are not checked.

        ``dataset`` and ``corruption`` become the parent folder's and the file's names.

        Parameters
        ----------
        path : str or os.PathLike
            The ``.npz`` file or ``.zarr`` directory store (a leading ``~`` expanded).
        severity, split
            As in :class:`CorruptedSet`.
        format : {"auto", "npz", "zarr"}
            "auto": zarr for a directory or a ``.zarr`` name, else npz.
        stored_severities : sequence of int, optional
            The levels the file holds, in row order (increasing, distinct, in 1..5), for an npz
            file written with ``generate --severities`` and moved away from the folder whose
            ``manifest.json`` records them (an npz file does not record them itself; a zarr
            store does). Default: the zarr attribute or the manifest entry, else all five (the
            reference's files). Given, it must agree with those where they exist.

        Returns
        -------
        CorruptedSet

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist.
        TypeError
            ``path`` not a str or os.PathLike; ``split`` not a str; ``severity`` not an int,
            a sequence of ints or None.
        ValueError
            Unknown ``format`` or ``split``; a directory read as npz or a file read as zarr; a
            file without the split's arrays or whose arrays do not have the layout of
            :class:`CorruptedSet`; ``severity`` outside 1..5, repeated or not stored;
            ``stored_severities`` not increasing distinct levels in 1..5, not dividing the
            file's rows, or other than the levels the file's zarr attribute or manifest entry
            records.
        ImportError
            A zarr store without zarr installed.
        """
        if format not in _FORMATS:
            raise ValueError(f"format must be one of {', '.join(map(repr, _FORMATS))}; "
                             f"got {format!r}")
        path = check_path(path, "path")
        split = _check_split(split)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such corrupted-set file: {path!r}")
        self = cls.__new__(cls)
        stem = os.path.basename(os.path.normpath(path))
        self.dataset = os.path.basename(os.path.dirname(os.path.abspath(path)))
        self.corruption = os.path.splitext(stem)[0]
        if stored_severities is not None:
            if isinstance(stored_severities, np.ndarray) and stored_severities.ndim == 1:
                stored_severities = stored_severities.tolist()
            if (isinstance(stored_severities, (str, bytes))
                    or not isinstance(stored_severities, (list, tuple))
                    or not all(_is_int(v) for v in stored_severities)):
                raise TypeError(f"stored_severities must be a sequence of ints (levels in "
                                f"1..{registry.N_SEVERITIES}) or None; got "
                                f"{stored_severities!r}")
            if not _valid_levels(list(stored_severities)):
                raise ValueError(f"stored_severities must be increasing distinct levels in "
                                 f"1..{registry.N_SEVERITIES}; got {stored_severities!r}")
            stored_severities = tuple(int(v) for v in stored_severities)
        self._init(path, _format_of(path, format), severity, split, stored_severities)
        return self

    def _init(self, path: str, fmt: str, severity, split, given=None) -> None:
        self.path, self.format = path, fmt
        self.split, shape, dtype, lshape = _describe(path, fmt, split)
        im_key, lb_key = f"{self.split}_images", f"{self.split}_labels"
        if dtype != np.uint8 or len(shape) not in (3, 4) or (
                len(shape) == 4 and shape[3] not in (1, 3)):
            raise ValueError(f"{path}: {im_key} must be uint8 (kN, H, W), (kN, H, W, 1) or "
                             f"(kN, H, W, 3) (k stored severities, N images each); "
                             f"got {dtype} {shape}")
        if len(lshape) not in (1, 2) or lshape[0] != shape[0]:
            raise ValueError(f"{path}: {lb_key} must have shape (kN, L) or (kN,) with the "
                             f"same kN rows as {im_key}; got {lshape} for images {shape}")
        stored = _stored_levels(path, fmt, shape[0], recorded_only=given is not None)
        if given is not None:
            if stored is not None and stored != given:
                raise ValueError(f"{path}: stored_severities={given} but the file's levels "
                                 f"are recorded as {stored}")
            stored = given
        self.stored_severities = stored
        if shape[0] % len(stored):
            hint = ("" if given is not None else "; a file of a generate --severities subset "
                    "moved away from its folder's manifest.json needs "
                    "CorruptedSet.from_path(..., stored_severities=...)")
            raise ValueError(f"{path}: {shape[0]} rows is not a multiple of {len(stored)} "
                             f"severities (the stored levels {stored}){hint}")
        self.n_per_severity = shape[0] // len(stored)
        self.severities = _check_severities(severity, stored)
        self.image_shape = shape[1:]
        self._arrays = None  # opened on first access, once per process (see _get)
        self._pid = os.getpid()

    # -- lazy, per-process arrays -------------------------------------------------------------

    def _get(self):
        if self._arrays is None or self._pid != os.getpid():
            self._arrays = _open_arrays(self.path, self.format, self.split)
            self._pid = os.getpid()
        return self._arrays

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_arrays"] = None  # never pickle a memory map or a decompressed copy
        return state

    @property
    def manifest(self):
        """The ``manifest.json`` beside the file as a dict, or None if there is none.

        Returns
        -------
        dict or None
            The parsed JSON (read on each access, not checked to be a ``generate``
            manifest); None when the file's folder has no ``manifest.json``.

        Raises
        ------
        ValueError
            The file is not UTF-8 JSON (the message names it).
        """
        mpath = os.path.join(os.path.dirname(os.path.abspath(self.path)), "manifest.json")
        if not os.path.exists(mpath):
            return None
        try:
            with open(mpath, encoding="utf-8") as fh:
                return json.load(fh)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError: neither names the file
            raise ValueError(f"{mpath} is not a valid JSON manifest ({e}); regenerate the set "
                             f"or remove the file") from None

    # -- selection ----------------------------------------------------------------------------

    def select(self, severity) -> "CorruptedSet":
        """A view of the same file exposing other levels.

        Parameters
        ----------
        severity : int, sequence of int, or None
            Levels in 1..5 among :attr:`stored_severities`, in the order to expose; None: all
            stored levels.

        Returns
        -------
        CorruptedSet
            A new object sharing the file (this one is unchanged).

        Raises
        ------
        TypeError
            ``severity`` not an int, a sequence of ints or None (a str included).
        ValueError
            An empty sequence, a level outside 1..5, a repeated level, or a level the file
            does not hold.
        """
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.severities = _check_severities(severity, self.stored_severities)
        return other

    def per_severity(self) -> dict:
        """One view per selected level.

        Returns
        -------
        dict of int to CorruptedSet
            ``{level: self.select(level)}`` for each level of :attr:`severities`, in that
            order; each view shares the file and has ``n_per_severity`` items.
        """
        return {s: self.select(s) for s in self.severities}

    def _row(self, i) -> tuple:
        n = len(self)
        i = scalar_of(i)
        if not _is_int(i):
            raise TypeError(f"index must be an int in -{n}..{n - 1}; got {i!r} "
                            f"({type(i).__name__})")
        given = i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {given} out of range for a set of {n} items")
        s = self.severities[i // self.n_per_severity]
        block = self.stored_severities.index(s)
        return block * self.n_per_severity + i % self.n_per_severity, s

    def severity_of(self, i: int) -> int:
        """The level of item ``i``.

        Parameters
        ----------
        i : int
            Item index in ``-len(self)..len(self) - 1`` (negative counts from the end; a 0-d
            integer array or tensor counts as an int).

        Returns
        -------
        int
            The level in 1..5, ``severities[i // n_per_severity]`` (after adding ``len(self)``
            to a negative ``i``).

        Raises
        ------
        TypeError
            ``i`` not an int (a 0-d integer array or tensor counts as one).
        IndexError
            ``i`` outside ``-len(self)..len(self) - 1``.
        """
        return self._row(i)[1]

    def __len__(self) -> int:
        return self.n_per_severity * len(self.severities)

    def __getitem__(self, i):
        """``(image, label)``: new writable arrays (uint8 :attr:`image_shape`; ``(L,)``, or
        ``()`` for 1-D labels).

        Raises
        ------
        TypeError
            ``i`` not an int (a slice included).
        IndexError
            ``i`` outside ``-len(self)..len(self) - 1``.
        """
        row, _ = self._row(i)
        images, labels = self._get()
        return np.array(images[row]), np.array(labels[row])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def arrays(self) -> tuple:
        """All selected items as ``(images, labels)`` arrays, in item order.

        Returns
        -------
        images : ndarray, shape (M,) + image_shape, uint8
            ``(M, H, W)``, ``(M, H, W, 1)`` or ``(M, H, W, 3)``, as stored.
        labels : ndarray, shape (M, L) or (M,), the file's dtype
            M = ``len(self)``. When the selection is a contiguous run of stored levels in
            increasing order and the file is an ``.npz``: read-only views, no copy (of the
            memory map for a stored member, nothing read yet; of the member decompressed once
            per process for a compressed one). Otherwise new arrays.
        """
        images, labels = self._get()
        n = self.n_per_severity
        blocks = [self.stored_severities.index(s) for s in self.severities]
        if all(b == a + 1 for a, b in zip(blocks, blocks[1:])):
            sl = slice(blocks[0] * n, (blocks[-1] + 1) * n)
            return images[sl], labels[sl]
        rows = np.concatenate([np.arange(b * n, (b + 1) * n) for b in blocks])
        if isinstance(images, np.ndarray):
            return images[rows], labels[rows]
        return (np.concatenate([images[b * n:(b + 1) * n] for b in blocks]),
                np.concatenate([labels[b * n:(b + 1) * n] for b in blocks]))

    def torch(self, transform=None, target_transform=None) -> "TorchCorruptedSet":
        """This set as a ``torch.utils.data.Dataset`` (see :class:`TorchCorruptedSet`).

        Parameters
        ----------
        transform, target_transform : callable, optional
            As in :class:`TorchCorruptedSet`.

        Returns
        -------
        TorchCorruptedSet
            Over this set's selected levels.

        Raises
        ------
        TypeError
            ``transform`` or ``target_transform`` neither callable nor None.
        ImportError
            torch is not installed.
        """
        return TorchCorruptedSet(self, transform=transform, target_transform=target_transform)

    def __repr__(self) -> str:
        return (f"CorruptedSet({self.path!r}, dataset={self.dataset!r}, "
                f"corruption={self.corruption!r}, split={self.split!r}, "
                f"severities={self.severities}, "
                f"n_per_severity={self.n_per_severity}, image_shape={self.image_shape})")


def _torch_dataset_base():
    try:
        from torch.utils.data import Dataset
    except ImportError as exc:
        raise missing_extra("TorchCorruptedSet", "torch", "torch", exc) from None
    return Dataset


class TorchCorruptedSet:
    """A :class:`CorruptedSet` as a ``torch.utils.data.Dataset`` yielding ``(image, label)``.

    Parameters
    ----------
    corrupted : CorruptedSet
        Its severity selection is kept (use ``corrupted.select(s)`` for one level).
    transform : callable, optional
        Receives each image as a PIL image (mode 'L' or 'RGB'), as MedMNIST's own datasets do,
        so the clean test split's transform is reused unchanged (for example
        ``Compose([ToTensor(), Normalize(...)])``). Without it the image is a uint8 tensor
        ``(C, H, W)`` (C = 1 for gray sets) so that the default collate works.
    target_transform : callable, optional
        Receives the label as an int64 ndarray ``(L,)`` (``()`` for 1-D stored labels); without
        it the label is an int64 tensor of that shape.

    Raises
    ------
    TypeError
        ``corrupted`` not a :class:`CorruptedSet`; ``transform`` or ``target_transform`` not
        callable or None.
    ImportError
        torch is not installed.

    Notes
    -----
    Created through :meth:`CorruptedSet.torch` or directly; instances are real subclasses of
    ``torch.utils.data.Dataset`` (the class is built on first use, so importing this module
    never imports torch), instances of a subclass of this class too; they pickle and copy
    (for spawned DataLoader workers) with their attributes.
    """

    def __new__(cls, *args, **kwargs):
        # A subclass defined by the user (class My(TorchCorruptedSet)) was not a Dataset, and
        # pickling or deep-copying it failed: "__new__() missing 1 required positional
        # argument: 'corrupted'" (both call cls.__new__(cls) without arguments).
        return object.__new__(_torch_class(cls))

    def __init__(self, corrupted, transform=None, target_transform=None):
        if not isinstance(corrupted, CorruptedSet):
            raise TypeError(f"corrupted must be a CorruptedSet; got {type(corrupted).__name__}")
        for name, fn in (("transform", transform), ("target_transform", target_transform)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None; got {type(fn).__name__}")
        self.corrupted = corrupted
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return len(self.corrupted)

    def __getitem__(self, i):
        import torch

        image, label = self.corrupted[i]
        label = label.astype(np.int64)
        if self.transform is not None:
            from PIL import Image

            image = self.transform(Image.fromarray(image.reshape(image.shape[0], image.shape[1])
                                                   if image.ndim == 3 and image.shape[2] == 1
                                                   else image))
        else:
            chw = image[None] if image.ndim == 2 else np.moveaxis(image, -1, 0)
            image = torch.from_numpy(np.ascontiguousarray(chw))
        label = self.target_transform(label) if self.target_transform is not None \
            else torch.from_numpy(label)
        return image, label

    def severity_of(self, i: int) -> int:
        """The level of item ``i``: :meth:`CorruptedSet.severity_of` of the wrapped set.

        Parameters
        ----------
        i : int
            Item index in ``-len(self)..len(self) - 1``.

        Returns
        -------
        int
            The level in 1..5.

        Raises
        ------
        TypeError
            ``i`` not an int (a 0-d integer array or tensor counts as one).
        IndexError
            ``i`` out of range.
        """
        return self.corrupted.severity_of(i)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.corrupted!r}, transform={self.transform!r}, "
                f"target_transform={self.target_transform!r})")

    def __reduce__(self):
        # Here, not in the made Dataset class, so that a subclass's own __reduce__ wins.
        return _reduce_torch_set(self)


#: {class: its Dataset subclass} and back, for TorchCorruptedSet and the user's subclasses of it
#: (built on first use, so that importing this module never imports torch).
_TORCH_CLASSES: dict = {}
_PLAIN_CLASSES: dict = {}


def _torch_class(cls=TorchCorruptedSet):
    """``cls`` itself if it already derives from ``torch.utils.data.Dataset``, else a subclass
    of ``(cls, Dataset)`` of the same name (made once per class)."""
    if cls in _PLAIN_CLASSES or issubclass(cls, _torch_dataset_base()):
        return cls
    made = _TORCH_CLASSES.get(cls)
    if made is None:
        made = type(cls.__name__, (cls, _torch_dataset_base()),
                    {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     "__doc__": cls.__doc__})
        _TORCH_CLASSES[cls], _PLAIN_CLASSES[made] = made, cls
    return made


def _reduce_torch_set(self):
    # Pickle by the importable class (the made one is not importable) and the state, which a
    # subclass's __getstate__ gives (it may drop a lock or an open file: self.__dict__ sent
    # them to pickle, which refused them). Python < 3.11 objects have no default __getstate__.
    getstate = getattr(self, "__getstate__", None)
    state = self.__dict__ if getstate is None else getstate()
    return (_new_torch_set, (_PLAIN_CLASSES.get(type(self), type(self)),), state)


def _new_torch_set(cls):
    """An empty instance of ``cls`` (a TorchCorruptedSet class) for unpickling."""
    return cls.__new__(cls)
