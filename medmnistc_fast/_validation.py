"""Argument checks for the public API. Kernels do no validation; everything is checked here once.

Every error names the argument and the allowed values. Nothing here mutates its input.
"""
from __future__ import annotations

import importlib.metadata
import math
import numbers
import os
import re

import numpy as np

from . import registry

#: Smallest image side accepted (pixels).
MIN_SIDE = 8


def _fmt_choices(choices) -> str:
    return ", ".join(repr(c) for c in choices)


def check_dataset(dataset, allowed=None, purpose: str = "") -> str:
    """Return ``dataset`` if it is one of ``allowed`` (default: every dataset and suite key).

    ``purpose`` (e.g. ``" for augmentation"``) is added to the error message.
    """
    allowed = tuple(registry.TABLES) if allowed is None else tuple(allowed)
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str, one of: {_fmt_choices(allowed)}; "
                        f"got {type(dataset).__name__}")
    if dataset not in allowed:
        raise ValueError(f"unknown dataset {dataset!r}{purpose}; valid datasets: "
                         f"{_fmt_choices(allowed)}")
    return dataset


def defined_elsewhere(corruption, datasets) -> str:
    """Hint for a corruption missing from ``datasets`` that other datasets or suites define.

    Returns ``" ('gaussian_noise' belongs to other datasets: 'dermamnist', ...)"`` (datasets
    in registry order), or ``""`` when no other dataset defines it.
    """
    if not isinstance(corruption, str):
        return ""
    others = [d for d in registry.TABLES if d not in datasets and corruption in registry.TABLES[d]]
    if not others:
        return ""
    return f" ({corruption!r} belongs to other datasets: {_fmt_choices(others)})"


def unknown_corruption_message(dataset: str, corruption) -> str:
    """Message for a corruption that ``dataset`` does not define: its valid ones and, when
    other datasets define it, which (:func:`defined_elsewhere`)."""
    return (f"corruption {corruption!r} is not defined for dataset {dataset!r}; valid corruptions: "
            f"{_fmt_choices(registry.TABLES[dataset])}{defined_elsewhere(corruption, (dataset,))}")


def check_corruption(dataset: str, corruption) -> str:
    """Return ``corruption`` if ``dataset`` (already checked) defines it, else raise."""
    valid = tuple(registry.TABLES[dataset])
    if not isinstance(corruption, str):
        raise TypeError(f"corruption must be a str, one of: {_fmt_choices(valid)}; "
                        f"got {type(corruption).__name__}")
    if corruption not in valid:
        raise ValueError(unknown_corruption_message(dataset, corruption))
    return corruption


def parse_decimal(text: str):
    """The int written in ``text`` as decimal ASCII digits (blanks around allowed), else None.

    ``int()`` alone also reads ``"1_0"`` as 10, ``"+3"`` as 3 and other scripts' digits
    (``"\u0663"``, Arabic-Indic three) as theirs: command-line and environment values take
    plain digits only, as ``OMP_NUM_THREADS`` does. Beyond Python's int-string limit
    (``sys.get_int_max_str_digits()``, 4300 digits by default) the answer is None too, not
    int()'s ValueError.
    """
    t = text.strip()
    if not (t.isascii() and t.isdigit()):
        return None
    try:
        return int(t)
    except ValueError:  # past sys.get_int_max_str_digits() (4300 by default)
        return None


def _is_int(x) -> bool:
    if type(x) is int:  # the common case, without the ABC checks below
        return True
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def scalar_of(x):
    """The Python scalar of a 0-d array or tensor (``torch.tensor(3)``, ``np.array(3)``), else
    ``x`` unchanged: dataset indices and epochs are then checked as ints (a 0-d float or bool
    stays a TypeError). ``torch.utils.data.Subset(ds, torch.tensor([...]))`` indexes ``ds``
    with 0-d tensors."""
    if getattr(x, "ndim", None) == 0 and hasattr(x, "item"):
        return x.item()
    return x


def check_severity(severity) -> int:
    """Return ``severity`` as an int in 1..5; bools, floats and strings are rejected."""
    if not _is_int(severity):
        raise TypeError(f"severity must be an int in 1..{registry.N_SEVERITIES}; "
                        f"got {severity!r} ({type(severity).__name__})")
    if not 1 <= int(severity) <= registry.N_SEVERITIES:
        raise ValueError(f"severity must be an int in 1..{registry.N_SEVERITIES}; got {severity!r}")
    return int(severity)


def check_nonneg_int(value, name: str, upper=None) -> int:
    """Return ``value`` as a non-negative int (for seeds, indices, start offsets), ``<= upper``
    (an inclusive bound; the message states it)."""
    if not _is_int(value):
        bound = "" if upper is None else f" <= {upper}"
        raise TypeError(f"{name} must be a non-negative int{bound}; got {value!r} "
                        f"({type(value).__name__})")
    if int(value) < 0:
        raise ValueError(f"{name} must be a non-negative int; got {value!r}")
    if upper is not None and int(value) > upper:
        raise ValueError(f"{name} must be a non-negative int <= {upper}; got {value!r}")
    return int(value)


def check_int(value, name: str, lo: int, hi=None, *, odd: bool = False) -> int:
    """Return ``value`` as an int in ``lo..hi`` (``hi`` None: no upper bound), odd too with
    ``odd`` (kernel sizes); bools, floats and strings are a TypeError, values outside the range
    (or even) a ValueError, both naming ``name`` and the whole rule."""
    kind = "an odd int" if odd else "an int"
    allowed = f"{kind} >= {lo}" if hi is None else f"{kind} in {lo}..{hi}"
    if not _is_int(value):
        raise TypeError(f"{name} must be {allowed}; got {value!r} ({type(value).__name__})")
    if int(value) < lo or (hi is not None and int(value) > hi) or (odd and int(value) % 2 == 0):
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    return int(value)


def check_int_pair(value, name: str, lo: int, hi: int) -> tuple:
    """Return ``value`` (a tuple, list or 1-D array of two ints) as a tuple of two ints, each in
    ``lo..hi``; a TypeError for another form (a 0-d array, floats, bools), a ValueError for a
    value outside the range, both naming ``name`` and the range."""
    seq = isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1)
    allowed = f"a pair of ints in {lo}..{hi}"
    if not (seq and len(value) == 2 and all(_is_int(v) for v in value)):
        raise TypeError(f"{name} must be {allowed}; got {value!r}")
    pair = (int(value[0]), int(value[1]))
    if min(pair) < lo or max(pair) > hi:
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    return pair


def check_seed(seed):
    """Return ``seed`` as a non-negative int, or None."""
    return None if seed is None else check_nonneg_int(seed, "seed")


def missing_extra(feature: str, module: str, extra: str,
                  error: ImportError | None = None) -> ImportError:
    """ImportError for an optional dependency ``module`` that ``feature`` needs.

    The packages to install are the requirements of this distribution's ``extra`` that apply to
    this interpreter (from its installed metadata, i.e. ``pyproject.toml``, environment markers
    such as ``python_version`` evaluated; ``module`` when that metadata is missing).
    medmnistc_fast is installed from a clone of its repository, not from a package index, so
    the message names the packages themselves and, for the clone, ``pip install '.[extra]'``.
    ``error``, the ImportError that importing ``module`` raised, tells a missing module (a
    ModuleNotFoundError in its chain) from an installed one that fails to import, such as
    zarr 2.16 beside numcodecs 0.16: the message then says so and quotes the error. A missing
    module other than ``module``, its packages and its submodules (``distributed`` behind
    ``dask.distributed``, ``numcodecs`` behind ``zarr``) is named in the message.
    """
    try:
        reqs = importlib.metadata.requires("medmnistc_fast") or []
    except importlib.metadata.PackageNotFoundError:
        reqs = []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    reqs = [r for r in reqs if marker.search(r)]
    try:
        from packaging.requirements import Requirement  # a dependency of scikit-image
    except ImportError:  # pragma: no cover - keep every requirement of the extra
        pass
    else:
        reqs = [r for r in reqs if Requirement(r).marker.evaluate({"extra": extra})]
    pkgs = [r.split(";")[0].strip() for r in reqs] or [module]
    install = "pip install " + " ".join(f"'{p}'" for p in pkgs)
    clone = f" (or, in a clone of medmnistc_fast, pip install '.[{extra}]')"
    chain, missing = error, error is None
    while chain is not None and not missing:
        missing = isinstance(chain, ModuleNotFoundError)
        if not missing:
            chain = chain.__cause__ or chain.__context__
    if missing:
        # a module other than ``module``, its packages or submodules is the one missing
        # (distributed for dask.distributed, numcodecs for zarr): name it, pip may find
        # ``module`` installed
        parts = module.split(".")
        own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        name = getattr(chain, "name", None)
        foreign = name and name not in own and not name.startswith(module + ".")
        which = f" ({chain})" if foreign else ""
        return ImportError(f"{feature} needs {module}{which}: {install}{clone}")
    return ImportError(f"{feature} needs {module}, which is installed but fails to import "
                       f"({type(error).__name__}: {error}); a version that works with the "
                       f"installed packages: {install}{clone}")


def check_path(value, name: str, kind: str = "") -> str:
    """``value`` (a str or os.PathLike naming a path) as a str, a leading ``~`` expanded
    (``os.path.expanduser``: ``~name`` of an unknown user stays as given), so that every path
    argument of the package takes ``~`` alike; TypeError naming ``name`` for anything else,
    bytes paths included. ``kind`` (``"folder"``, ``"file"``) goes into the message."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        what = f"{kind} path" if kind else "path"
        raise TypeError(f"{name} must be a str or os.PathLike {what}; got {value!r} "
                        f"({type(value).__name__})")
    return os.path.expanduser(path)


def check_folder(value, name: str) -> str:
    """:func:`check_path` for a folder argument; also a ValueError naming ``name`` for ``''``,
    which ``os.path`` would read as the working directory (an unset shell variable in
    ``--from-folder "$DIR"`` scanned whatever folder the command ran in)."""
    path = check_path(value, name, "folder")
    if not path:
        raise ValueError(f"{name} must name a folder; got '' (use '.' for the working "
                         f"directory)")
    return path


def reject_masked(arr, name: str, why: str = "the corruptions have no notion of a mask",
                  fix: str = "", want: str = "a plain numpy.ndarray") -> None:
    """TypeError naming ``name`` if ``arr`` is a masked array (its mask would be silently
    ignored); ``why`` says why, ``fix`` adds a remedy to ``.filled(value)`` / ``.data``,
    ``want`` says what ``name`` must be."""
    if isinstance(arr, np.ma.MaskedArray):
        raise TypeError(f"{name} must be {want}, not a masked array: {why}; pass "
                        f"{name}.filled(value) or {name}.data{fix}")


def _check_array(arr, name: str, ndims: tuple, layout: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of dtype uint8 with shape {layout}; "
                        f"got {type(arr).__name__}")
    reject_masked(arr, name)
    if arr.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8 (convert with skimage.util.img_as_ubyte "
                        f"or an explicit cast); got {arr.dtype}")
    if arr.ndim not in ndims:
        raise ValueError(f"{name} must have shape {layout}; got shape {arr.shape}")
    return arr


def _check_channels_and_sides(shape, name: str, layout: str, full_shape=None) -> None:
    h, w, c = shape
    if c not in (1, 3):
        raise ValueError(f"{name} must have 1 or 3 channels (shape {layout}); got shape "
                         f"{shape if full_shape is None else full_shape}")
    if h < MIN_SIDE or w < MIN_SIDE:
        raise ValueError(f"{name} must be at least {MIN_SIDE} x {MIN_SIDE} pixels; got {h} x {w}")


def as_hwc(image, name: str = "image") -> np.ndarray:
    """View ``image`` ((H, W), (H, W, 1) or (H, W, 3) uint8) as C-contiguous (H, W, C).

    Returns a view when ``image`` is already contiguous, else a copy; never writes to it.
    """
    layout = "(H, W), (H, W, 1) or (H, W, 3)"
    arr = _check_array(image, name, (2, 3), layout)
    hwc = arr[:, :, None] if arr.ndim == 2 else arr
    _check_channels_and_sides(hwc.shape, name, layout)
    return np.ascontiguousarray(hwc)


def as_nhwc(images, name: str = "images", single: str = "corrupt()") -> np.ndarray:
    """View ``images`` ((N, H, W), (N, H, W, 1) or (N, H, W, 3) uint8) as contiguous (N, H, W, C).

    ``single`` names the call for one image in the error for an (H, W, C)-looking array.
    """
    layout = "(N, H, W), (N, H, W, 1) or (N, H, W, 3)"
    arr = _check_array(images, name, (3, 4), layout)
    if arr.ndim == 3 and arr.shape[2] in (1, 3) and min(arr.shape[:2]) >= MIN_SIDE:
        raise ValueError(f"{name} of shape {arr.shape} looks like one (H, W, C) image, not a "
                         f"batch {layout}; use {single} or add a batch axis (images[None])")
    nhwc = arr[..., None] if arr.ndim == 3 else arr
    _check_channels_and_sides(nhwc.shape[1:], name, layout, arr.shape)
    return np.ascontiguousarray(nhwc)


def to_float(value) -> float:
    """``float(value)`` for a real number, with an int beyond the float range (about 1.8e308)
    mapped to +inf or -inf instead of raising OverflowError, so range checks report it as a
    ValueError naming the argument."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def check_positive(value, name: str, *, integer: bool = False, upper=None, inclusive_upper=True,
                   lower=None):
    """Check a physical parameter of the functional layer: a finite number > 0 (optionally <= upper).

    With ``lower``, the number must lie in ``[lower, upper]`` instead (``upper`` None: no upper
    bound), and every out-of-range value (0, negatives and NaN included) gets that one message.
    """
    if type(value) is float and 0.0 < value < math.inf and not integer and lower is None \
            and upper is None:
        return value  # the common case, at once (augmentation checks kernel parameters per call)
    ok_type = _is_int(value) if integer else (
        isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, bool))
    kind = "an int" if integer else "a real number"
    hi = math.inf if upper is None else upper
    if lower is not None:
        allowed = f"in [{lower:g}, {hi:g}]"
    else:
        op = "<=" if inclusive_upper else "<"
        allowed = "> 0 and finite" if upper is None else f"> 0 and {op} {upper}"
    if not ok_type:  # the message states the range too, as the ValueError below does
        raise TypeError(f"{name} must be {kind} {allowed}; got {value!r} ({type(value).__name__})")
    v = to_float(value)
    if lower is not None:
        if not lower <= v <= hi:  # also rejects NaN
            raise ValueError(f"{name} must be {allowed}; got {value!r}")
        return v
    if not np.isfinite(v) or v <= 0 or (upper is not None and (v > upper if inclusive_upper else v >= upper)):
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    return int(value) if integer else v
