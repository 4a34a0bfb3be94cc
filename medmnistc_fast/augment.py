"""Training-time augmentation with the MedMNIST-C corruptions (the reference's AugMedMNISTC, fixed).

Each call picks one of the dataset's corruptions or *identity* (uniformly by default) and draws
that corruption's parameters uniformly between the smallest and the largest value of its
severity table, then corrupts the image with the same sampler and kernel as
:func:`medmnistc_fast.corrupt`. So a drawn parameter equal to a table entry gives exactly the
benchmark's corruption of that level (except stain_deposit's level 5, whose 32 px inks the
augmentation never draws: it always uses the 24 px set, see below; and the pathology suites'
marking, whose blot lands at a random position), and spatial parameters (given at 224 px in
the tables, 96 or 224 px for the pathology suites ``pathology96`` / ``pathology224``) scale
with ``min(H, W)`` over that size by the same rule
(:attr:`medmnistc_fast.corruptions._spec.Context.scale`).

Parameter draws (``lo``/``hi`` = smallest/largest table value over the chosen levels, per
component; the reference draws ``uniform(first, last)``, which is wrong for descending or
non-monotone tables, and truncates integers so their top value never occurs):

=====================================  =====================================================
corruption                             draw
=====================================  =====================================================
pixelate, colour, gamma, black_corner  float ``U[lo, hi)``
noises (gaussian, speckle, impulse,    uniform over :data:`NOISE_GRID_POINTS` equally
shot)                                  spaced values of ``[lo, hi]`` (see there why)
jpeg_compression                       int, uniform on ``lo..hi`` (inclusive)
gaussian_blur                          odd int, uniform on the odd values of ``lo..hi``
defocus_blur, motion_blur              (float, float), each ``U[lo, hi)`` independently
                                       (motion blur's angle is drawn by its sampler,
                                       ``U(-45, 45)`` degrees)
zoom_blur                              largest zoom ``U[lo, hi)`` of the levels' largest
                                       zooms, step ``U[lo, hi)`` of the levels' steps; zooms
                                       ``1, 1 + step, ...`` up to the largest (the tables'
                                       ``arange(1, top, step)`` form)
stain_deposit                          max marks int on ``lo..hi``; the 24 px inks (the
                                       reference's augmentation path uses key ``'3'``)
bubble                                 (max radius, max bubbles), ints on ``lo..hi`` each
characters                             (max words int, max letters int, max font scale float)
pathology suites: brightness, hue,     float ``U[lo, hi)`` (HSV shift amounts; blend
saturate, bubble                       strength)
pathology suites: marking              (width, height): one of :data:`BOX_GRID_POINTS`
                                       boxes from the smallest to the largest table box
                                       (one grid point for both sides, so the table's
                                       proportions are kept), pasted at a uniformly random
                                       position per image (``MARKING_RANDOM``), not at the
                                       benchmark's fixed corner
=====================================  =====================================================

The pathology suites' other corruptions (pixelate, JPEG, defocus and motion blur) follow the
MedMNIST-C rows; ``folds`` use :func:`medmnistc_fast.registry.fold_of` (brightness and hue in
'color', marking in 'task-specific').

Randomness (no global state is ever touched):

* **stream mode** (``aug(img)``): a :class:`numpy.random.Generator` (PCG64) seeded from
  ``seed``. Inside a torch ``DataLoader`` worker the stream is re-derived, at the worker's first
  call, from ``torch.utils.data.get_worker_info().seed`` (and ``seed``): workers draw different
  streams, every epoch differs, and under a fixed ``torch.manual_seed`` (or DataLoader
  ``generator``) the whole epoch repeats exactly. Several ``seed=None`` transforms in one worker
  (two views of each image, say) draw distinct streams: the k-th of them to start its stream
  there (k = 0, 1, ...; the order is fixed by the dataset's code) mixes k into the worker seed.
  With ``seed=None`` each process that is not a DataLoader worker draws fresh OS entropy; with
  an int seed, copies of the transform in other processes repeat the same stream (as a copied
  numpy Generator does): use keyed mode there.
* **keyed mode** (``aug(img, index=i, epoch=e)``, :meth:`AugMedMNISTC.batch` with ``start``,
  :class:`AugmentedDataset`): the draws are a pure function of (seed, dataset, index, epoch),
  whatever the number of workers, batch split or order. With ``seed=None`` a seed is drawn once
  when the transform is built and travels with it to workers.

References
----------
F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved classifier
robustness by simulating realistic image corruptions", arXiv:2406.17536 (2024), section 4
(corruptions as augmentation). Reference implementation: ``medmnistc`` 0.1.0,
``medmnistc/augmentation.py`` (``AugMedMNISTC``) and the ``augmentation=True`` branches of
``medmnistc/corruptions/*.py``.
"""
from __future__ import annotations

import bisect
import functools
import math
import numbers
import operator
import os
import sys
import zlib
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from . import registry, rng
from ._validation import (MIN_SIDE, _is_int, as_hwc, as_nhwc, check_corruption, check_dataset,
                          check_int_pair, check_nonneg_int, check_seed, reject_masked,
                          scalar_of, to_float)
from .api import MAX_INDEX, _check_threads, _run_chunks, get_num_threads
from .corruptions import color, digital, kind_of, noise
from .corruptions._spec import Context, check_max_side
from .corruptions.artifacts import INK_SIDES

__all__ = ["AugMedMNISTC", "AugmentedDataset", "EpochSampler", "Op", "param_range"]

#: Name of the no-op choice.
IDENTITY = "identity"
#: Largest ``n_ops`` (corruptions applied in a row per call; RandAugment uses 1-3).
MAX_OPS = 64

#: Ink set (pixels at 224 px) of stain_deposit in augmentation: the reference's augmentation
#: path calls ``self.inks[str(max(3, severity))]`` with the default ``severity=-1``, i.e. key '3'.
AUG_INK_SIDE = INK_SIDES["3"]

#: Noise parameters are drawn uniformly from this many equally spaced values between the
#: smallest and largest table value (both included), not from a continuum: the exact noise
#: kernels build a 256 x 256 law and alias table per parameter value (about 8 ms, plus about
#: 40 ms for the gray law, and 0.8 MB each, cached in :mod:`medmnistc_fast.corruptions.noise`),
#: so a continuum would rebuild them on every call and fill the caches (about 200 MB per
#: process). 17 values: a quarter of the spacing between levels of a five-level table; at most
#: 3 x 17 cached tables per channel count (40 MB; impulse noise needs none).
NOISE_GRID_POINTS = 17

# How each corruption's table entry is drawn: a tuple of component rules ("float", "int",
# "odd"), or a special rule name. The pathology suites' own kinds (which may share a MedMNIST-C
# name) are in _PATHOLOGY_RULES; their other corruptions use these.
_RULES: dict = {
    "pixelate": ("float",),
    "jpeg_compression": ("int",),
    "gaussian_noise": ("grid",),
    "speckle_noise": ("grid",),
    "impulse_noise": ("grid",),
    "shot_noise": ("grid",),
    "defocus_blur": ("float", "float"),
    "motion_blur": ("float", "float"),
    "zoom_blur": "zoom",
    "gaussian_blur": ("odd",),
    "brightness_up": ("float",),
    "brightness_down": ("float",),
    "contrast_up": ("float",),
    "contrast_down": ("float",),
    "gamma_corr_up": ("float",),
    "gamma_corr_down": ("float",),
    "saturate": ("float",),
    "stain_deposit": "stain",
    "bubble": ("int", "int"),
    "black_corner": ("float",),
    "characters": ("int", "int", "float"),
}


#: The pathology suites' own kinds: HSV shifts (amounts in [0, 1]), the blend strength of the
#: bubble, and the ink blot's (width, height) drawn as one box (see :func:`_draw_param`).
_PATHOLOGY_RULES: dict = {
    "brightness": ("float",),
    "saturate": ("float",),
    "hue": ("float",),
    "bubble": ("float",),
    "marking": "box",
}
#: The pathology suites' marking draws its blot's (width, height) from this many boxes between
#: the smallest and the largest table box, both sides from one grid point ``j``:
#: ``side = lo + floor(j (hi - lo) / 16 + 1/2)``. A grid because each new box size renders a new
#: blot (3-25 ms at 224 px, cached per size: :func:`~.corruptions.pathology.blot`); 17 points
#: keep every box of a run in that cache.
BOX_GRID_POINTS = 17

_NOISE_NAMES = frozenset(name for name, rule in _RULES.items() if rule == ("grid",))


def _rule(dataset: str, corruption: str):
    """The draw rule of ``corruption`` in ``dataset`` (names already validated)."""
    if dataset in registry.PATHOLOGY_SUITES and corruption in _PATHOLOGY_RULES:
        return _PATHOLOGY_RULES[corruption]
    return _RULES[corruption]


class Op(NamedTuple):
    """One drawn operation.

    Attributes
    ----------
    corruption : str
        A registry corruption name, or ``"identity"``.
    param : Any
        The drawn parameter, in the units and form of a severity-table entry (pixels at the
        table's reference size: 224 px, 96 px for ``pathology96``); None for identity.
    key : int
        64-bit key from which the corruption's sampler draws its own random values (motion
        angle, noise stream, positions); 0 for identity.
    """

    corruption: str
    param: Any
    key: int


# ---------------------------------------------------------------------------------------------
# Parameter ranges and draws
# ---------------------------------------------------------------------------------------------

def _zoom_features(zooms) -> tuple:
    """(largest zoom, step) of one zoom_blur table entry ``arange(1, top, step)``."""
    return (max(zooms), zooms[1] - zooms[0])


def param_range(dataset: str, corruption: str, levels=(1, 5)) -> tuple:
    """The per-component ``(low, high)`` ranges the augmentation draws ``corruption`` from.

    Parameters
    ----------
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` or :data:`medmnistc_fast.PATHOLOGY_SUITES`.
    corruption : str
        One of ``medmnistc_fast.corruptions(dataset)``.
    levels : (int, int)
        Inclusive range of severity levels (1..5) whose table entries bound the draws: a
        tuple, list or 1-D array of two ints.

    Returns
    -------
    tuple of (low, high) pairs
        One pair per parameter component: the smallest and largest table value over the
        levels. For zoom_blur: ((low, high) of the largest zoom, (low, high) of the step). For
        stain_deposit: ((low, high) of the maximum number of marks,). For the pathology
        suites' marking: ((low, high) of the width, (low, high) of the height).

    Raises
    ------
    TypeError
        ``dataset`` or ``corruption`` not a str; ``levels`` not a pair of ints.
    ValueError
        ``dataset`` not one of the 12 MedMNIST-C datasets or the 2 pathology suites,
        ``corruption`` not defined for it, ``levels`` not ``1 <= low <= high <= 5``.
    """
    dataset = _check_dataset_aug(dataset)
    corruption = check_corruption(dataset, corruption)
    lo, hi = _check_levels(levels)
    rows = registry.TABLES[dataset][corruption][lo - 1:hi]
    rule = _rule(dataset, corruption)
    if rule == "zoom":
        rows = [_zoom_features(z) for z in rows]
    elif not isinstance(rows[0], tuple):
        rows = [(r,) for r in rows]
    return tuple((min(col), max(col)) for col in zip(*rows))


def _box_side(lo, hi, j: int) -> int:
    """Side of box ``j`` (0 .. BOX_GRID_POINTS - 1) on the integers ``lo..hi``."""
    return int(lo) + math.floor((int(hi) - int(lo)) * j / (BOX_GRID_POINTS - 1) + 0.5)


def _boxes(ranges) -> list:
    """The :data:`BOX_GRID_POINTS` (width, height) boxes the box rule draws from ``ranges``,
    in grid order (repeats kept)."""
    return [tuple(_box_side(lo, hi, j) for lo, hi in ranges) for j in range(BOX_GRID_POINTS)]


def _grid_value(lo, hi, j: int) -> float:
    """Point ``j`` (0 .. NOISE_GRID_POINTS - 1) of the equally spaced noise grid on [lo, hi]."""
    return float(lo + (hi - lo) * j / (NOISE_GRID_POINTS - 1))


def _draw_component(g: np.random.Generator, kind: str, lo, hi):
    if kind == "float":
        return float(g.uniform(lo, hi)) if hi > lo else float(lo)
    if kind == "grid":
        return _grid_value(lo, hi, int(g.integers(0, NOISE_GRID_POINTS)))
    if kind == "int":
        return int(g.integers(int(lo), int(hi), endpoint=True))
    # odd: uniform over the odd values in [lo, hi]
    first = int(lo) + (1 - int(lo) % 2)
    count = (int(hi) - first) // 2
    return first + 2 * int(g.integers(0, max(count, 0), endpoint=True))


def _draw_param(g: np.random.Generator, corruption: str, ranges: tuple, rule=None):
    """One parameter of ``corruption`` (draw ``rule``, default the MedMNIST-C one)."""
    rule = _RULES[corruption] if rule is None else rule
    if rule == "box":
        # One grid point j for both sides, so the box keeps the table's proportions; a grid (as
        # for the noises) because every new box size renders a new blot (3-25 ms at 224 px).
        j = int(g.integers(0, BOX_GRID_POINTS))
        return tuple(_box_side(lo, hi, j) for lo, hi in ranges)
    if rule == "zoom":
        top = _draw_component(g, "float", *ranges[0])
        step = _draw_component(g, "float", *ranges[1])
        n = int(math.floor((top - 1.0) / step + 1e-9)) + 1
        return tuple(1.0 + step * k for k in range(max(n, 1)))
    if rule == "stain":
        return (_draw_component(g, "int", *ranges[0]), AUG_INK_SIDE)
    values = tuple(_draw_component(g, k, lo, hi) for k, (lo, hi) in zip(rule, ranges))
    return values[0] if len(values) == 1 else values


def _param_ok(corruption: str, param, ranges: tuple, rule=None) -> bool:
    """Whether ``param`` has the form :func:`_draw_param` gives ``corruption`` (draw ``rule``)
    with every component inside ``ranges`` (floats within a relative 1e-9 of the bounds, for
    rounding in the draws; ints and odd ints exactly)."""
    def within(v, kind, lo, hi) -> bool:
        if kind in ("int", "odd"):
            return _is_int(v) and lo <= v <= hi and (kind == "int" or int(v) % 2 == 1)
        if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
            return False
        slack = 1e-9 * max(1.0, abs(lo), abs(hi))
        return math.isfinite(v) and lo - slack <= v <= hi + slack

    rule = _RULES[corruption] if rule is None else rule
    if rule == "box":
        return (isinstance(param, (tuple, list)) and len(param) == 2
                and all(_is_int(v) for v in param)
                and tuple(param) in _boxes(ranges))
    if rule == "zoom":
        return _zoom_ok(param, ranges, within)
    if rule == "stain":
        return (isinstance(param, (tuple, list)) and len(param) == 2
                and within(param[0], "int", *ranges[0]) and _is_int(param[1])
                and int(param[1]) in INK_SIDES.values())
    values = (param,) if len(rule) == 1 else param
    return (isinstance(values, (tuple, list)) and len(values) == len(rule)
            and all(within(v, k, lo, hi) for v, k, (lo, hi) in zip(values, rule, ranges)))


def _zoom_ok(param, ranges: tuple, within) -> bool:
    """Whether ``param`` is a zoom list :func:`_draw_param` can give: ``1, 1 + s, ..., 1 + s k``
    with the step ``s`` in ``ranges[1]`` and a drawn top ``t`` in ``ranges[0]`` that yields
    exactly these zooms (``1 + s k <= t < 1 + s (k + 1)``); floats within a relative 1e-9.
    Checking only that every zoom lies in ``[1, top]`` let ``(1.0, 1.1)`` through for a
    transform whose steps are at most 0.03 and whose tops are at least 1.11."""
    if not (isinstance(param, (tuple, list)) and len(param) > 0
            and all(within(z, "float", 1.0, ranges[0][1]) for z in param)):
        return False
    (top_lo, top_hi), (step_lo, step_hi) = ranges
    zooms = [float(z) for z in param]
    if not within(zooms[0], "float", 1.0, 1.0):
        return False
    slack = 1e-9 * max(1.0, top_hi)
    if len(zooms) == 1:  # drawn when the step exceeds the top's distance from 1
        return 1.0 + step_hi > top_lo - slack
    step = zooms[1] - zooms[0]
    return (within(step, "float", step_lo, step_hi)
            and all(abs(z - (1.0 + step * k)) <= slack for k, z in enumerate(zooms))
            and zooms[-1] + step > top_lo - slack)


def _make_drawer(corruption: str, ranges: tuple, rule=None):
    """``g -> _draw_param(g, corruption, ranges, rule)``, with the per-call work reduced.

    The same draws from the same generator methods, except two equivalent cheaper calls:
    ``g.uniform(lo, hi)`` is ``lo + (hi - lo) * g.random()`` (NumPy's ``random_uniform`` is
    ``low + range * next_double``, in double, with ``range = high - low``; Python floats repeat
    it operation for operation), and the rest falls back to :func:`_draw_param`.
    tests/test_augment.py checks both forms give the same parameters and leave the generator in
    the same state.
    """
    rule = _RULES[corruption] if rule is None else rule
    if rule == ("float",):
        ((lo, hi),) = ranges
        if hi > lo:
            low, span = float(lo), float(hi) - float(lo)

            def draw_float(g):
                return low + span * g.random()

            return draw_float
        const = float(lo)
        return lambda g: const
    if rule == ("grid",):
        ((lo, hi),) = ranges
        integers, n = np.random.Generator.integers, NOISE_GRID_POINTS

        def draw_grid(g):
            return _grid_value(lo, hi, int(integers(g, 0, n)))

        return draw_grid
    return lambda g: _draw_param(g, corruption, ranges, rule)


def _draw_key(g: np.random.Generator) -> int:
    """``int(g.integers(0, 2**64, dtype=np.uint64))`` in one call.

    For the full 64-bit range NumPy's bounded-integer sampler returns the bit generator's next
    64-bit output unchanged (``random_bounded_uint64_fill``: ``rng == 0xFFFFFFFFFFFFFFFF`` gives
    ``off + next_uint64``), which ``random_raw`` returns for PCG64 (its ``next_raw`` is
    ``next_uint64``); the generators here are always PCG64.
    """
    return g.bit_generator.random_raw()


# ---------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------

def _check_dataset_aug(dataset) -> str:
    return check_dataset(dataset, registry.DATASETS + registry.PATHOLOGY_SUITES,
                         " for augmentation")


def _check_levels(levels) -> tuple:
    lo, hi = check_int_pair(levels, "levels", 1, registry.N_SEVERITIES)
    if lo > hi:
        raise ValueError(f"levels must satisfy 1 <= low <= high <= {registry.N_SEVERITIES}; "
                         f"got {levels!r}")
    return lo, hi


def _select(dataset, corruptions, folds) -> list:
    available = list(registry.TABLES[dataset])
    if corruptions is None:
        chosen = available
    else:
        if isinstance(corruptions, np.ndarray) and corruptions.ndim == 1:
            corruptions = corruptions.tolist()  # e.g. np.array(names): its str entries
        if isinstance(corruptions, str) or not isinstance(corruptions, (Sequence, set, frozenset)):
            raise TypeError("corruptions must be a sequence of corruption names (or None for "
                            f"all of {dataset!r}: {', '.join(map(repr, available))}); "
                            f"got {corruptions!r}")
        for c in corruptions:  # check_corruption would name the item "corruption"
            if not isinstance(c, str):
                raise TypeError(f"corruptions must hold corruption names (str) of {dataset!r}: "
                                f"{', '.join(map(repr, available))}; got {c!r}")
        wanted = {check_corruption(dataset, c) for c in corruptions}
        chosen = [c for c in available if c in wanted]
        if not chosen:
            raise ValueError(f"corruptions must name at least one of the corruptions of {dataset!r} "
                             f"({', '.join(map(repr, available))}), or be None for all; got "
                             f"{corruptions!r}")
    if folds is not None:
        if isinstance(folds, str):
            folds = (folds,)
        if not isinstance(folds, (Sequence, set, frozenset)):
            raise TypeError(f"folds must be a fold name or a sequence of fold names "
                            f"({', '.join(map(repr, registry.FOLDS))}), or None; got {folds!r}")
        wanted_folds = set()
        for f in folds:
            if not isinstance(f, str):  # a list raised "unhashable type: 'list'"
                raise TypeError(f"folds must hold fold names (str), one of "
                                f"{', '.join(map(repr, registry.FOLDS))}; got {f!r}")
            if f not in registry.FOLDS:
                raise ValueError(f"unknown fold {f!r}; valid folds: "
                                 f"{', '.join(map(repr, registry.FOLDS))}")
            wanted_folds.add(f)
        chosen = [c for c in chosen if registry.fold_of(dataset, c) in wanted_folds]
        if not chosen:
            raise ValueError(f"folds {list(folds)!r} select none of the corruptions of {dataset!r} "
                             f"({', '.join(map(repr, available))})")
    return chosen


def _check_weights(weights, choices: list) -> np.ndarray:
    w = np.ones(len(choices))
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise TypeError("weights must be a mapping {choice name: weight >= 0} (choices: "
                            f"{', '.join(map(repr, choices))}); got {type(weights).__name__}")
        for name, value in weights.items():
            if name not in choices:
                why = ("identity=False leaves it out; " if name == "identity" else "")
                raise ValueError(f"weights has unknown choice {name!r} ({why}valid choices: "
                                 f"{', '.join(map(repr, choices))})")
            if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
                raise TypeError(f"weights[{name!r}] must be a finite real number >= 0; "
                                f"got {value!r} ({type(value).__name__})")
            if not math.isfinite(to_float(value)) or value < 0:
                raise ValueError(f"weights[{name!r}] must be a finite real number >= 0; "
                                 f"got {value!r}")
            w[choices.index(name)] = to_float(value)
    if not w.max() > 0:
        raise ValueError("weights must give at least one choice a positive weight")
    w = w / w.max()  # first, so that a sum of huge finite weights cannot overflow
    return w / w.sum()


# ---------------------------------------------------------------------------------------------
# Image type adapters (PIL / ndarray / torch tensor)
# ---------------------------------------------------------------------------------------------

def _float_to_u8(x: np.ndarray, name: str) -> np.ndarray:
    """Float image in [0, 1] -> uint8 by ``floor(x * 255 + 0.5)`` (round half up)."""
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: floating images must be finite, with values in [0, 1]")
    if x.size and (x.min() < 0 or x.max() > 1):
        raise ValueError(f"{name}: floating images must have values in [0, 1]; got range "
                         f"[{float(x.min())}, {float(x.max())}]")
    # asarray: a ufunc on a 0-d array returns a scalar, which the shape check would then call
    # "not a numpy.ndarray" (a TypeError) instead of reporting the shape.
    return np.asarray(np.floor(x.astype(np.float64) * 255.0 + 0.5).astype(np.uint8))


def _torch():
    """The torch module if it is already imported (never imports it)."""
    return sys.modules.get("torch")


@functools.lru_cache(maxsize=1)
def _float_tensor_dtypes(torch) -> tuple:
    """torch's dtypes named in :data:`_FLOAT_TENSOR_NAMES` (not the float8 ones, which have no
    CPU arithmetic), made once instead of on every tensor call."""
    return tuple(getattr(torch, n) for n in _FLOAT_TENSOR_NAMES)


def _is_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _is_pil(x) -> bool:
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(x, pil.Image)


_FLOAT_TENSOR_NAMES = ("float16", "bfloat16", "float32", "float64")


class _Adapter(NamedTuple):
    """How to turn the working uint8 array back into the caller's type."""

    kind: str        # "numpy", "pil", "tensor"
    shape: tuple     # caller's shape
    dtype: Any       # caller's dtype (numpy dtype or torch dtype)
    ref: Any         # the tensor (for device/subclass) or PIL mode
    batched: bool
    owned: bool      # the working array is private to the call (output may reuse it)


def _read_pil(image, name: str):
    """Pixels of a PIL image of mode 'L' or 'RGB' as a new uint8 array (H, W, 1 or 3)
    (:func:`medmnistc_fast.corruptions.digital.from_pil`); H, W >= MIN_SIDE."""
    mode = image.mode
    if mode not in ("L", "RGB"):
        raise ValueError(f"{name} (a PIL image) must have mode 'L' or 'RGB'; got mode "
                         f"{mode!r} (convert it first, e.g. image.convert('RGB'))")
    hwc = digital.from_pil(image, 1 if mode == "L" else 3)
    h, w, _ = hwc.shape
    if h < MIN_SIDE or w < MIN_SIDE:
        raise ValueError(f"{name} must be at least {MIN_SIDE} x {MIN_SIDE} pixels; "
                         f"got {h} x {w}")
    return hwc


#: The call for one image, named in errors of :meth:`AugMedMNISTC.batch`.
_SINGLE = "the transform itself (aug(image))"


def _to_array(image, name: str, batched: bool):
    """Caller's image -> (uint8 ndarray (H, W, C) or (N, H, W, C), _Adapter).

    ``_Adapter.owned`` tells whether the array is private to this call (a copy or a
    conversion), so an unchanged image may be returned on it without another copy.
    """
    if isinstance(image, np.ndarray):
        arr = image
        reject_masked(arr, name)  # before the float conversion, which would drop the mask
        if arr.dtype.kind == "f":
            arr = _float_to_u8(arr, name)
        elif arr.dtype != np.uint8:
            raise TypeError(f"{name} must have dtype uint8, or a floating dtype with values in "
                            f"[0, 1]; got {arr.dtype}")
        work = as_nhwc(arr, name, _SINGLE) if batched else as_hwc(arr, name)
        # uint8 output is work reshaped (no copy) -> not owned; float output is a new array.
        return work, _Adapter("numpy", image.shape, image.dtype, None, batched,
                              arr.dtype != image.dtype)
    if not batched and _is_pil(image):
        hwc = _read_pil(image, name)
        h, w, _ = hwc.shape
        shape = (h, w) if image.mode == "L" else (h, w, 3)
        return hwc, _Adapter("pil", shape, np.uint8, image.mode, False, True)
    if _is_tensor(image):
        torch = _torch()
        t = image.detach()
        # Sparse and nested tensors, meta tensors (no data) and float8 dtypes (no arithmetic
        # on CPU) failed inside torch with NotImplementedError or RuntimeError.
        if t.is_nested or t.layout != torch.strided:
            got = ("a nested tensor (pass its images one by one)" if t.is_nested
                   else f"layout {t.layout} (convert it first: .to_dense())")
            raise TypeError(f"{name} (a torch tensor) must be a dense (strided) tensor; "
                            f"got {got}")
        if t.device.type == "meta":
            raise ValueError(f"{name} (a torch tensor) must hold data (a CPU or accelerator "
                             f"device); got a tensor on the 'meta' device")
        want = 4 if batched else 3
        layout = "(N, C, H, W)" if batched else "(C, H, W)"
        if t.ndim != want or t.shape[-3] not in (1, 3):
            raise ValueError(f"{name} (a torch tensor) must have shape {layout} with C = 1 or 3; "
                             f"got shape {tuple(t.shape)}")
        if t.dtype != torch.uint8 and t.dtype not in _float_tensor_dtypes(torch):
            raise TypeError(f"{name} (a torch tensor) must have dtype torch.uint8, or a floating "
                            f"dtype ({', '.join(_FLOAT_TENSOR_NAMES)}) with values in [0, 1]; "
                            f"got {t.dtype}")
        t = t.cpu()
        if t.dtype == torch.uint8:
            arr = t.numpy()
        else:
            arr = _float_to_u8(t.to(torch.float64).numpy(), name)
        arr = np.moveaxis(arr, -3, -1)
        work = as_nhwc(arr, name, _SINGLE) if batched else as_hwc(arr, name)
        # The result is always copied into a clone of the tensor: the array is never returned.
        return work, _Adapter("tensor", tuple(image.shape), image.dtype, image, batched, True)
    allowed = ("a uint8 or float ndarray (N, H, W[, C]) or a torch tensor (N, C, H, W)"
               if batched else "a PIL image (mode 'L' or 'RGB'), an ndarray (H, W[, C]) or a "
               "torch tensor (C, H, W)")
    raise TypeError(f"{name} must be {allowed}; got {type(image).__name__}")


def _from_array(out: np.ndarray, ad: _Adapter):
    """Working uint8 array (H, W, C) / (N, H, W, C) -> the caller's type, shape and dtype."""
    if ad.kind == "numpy":
        if ad.dtype == np.uint8:
            return np.ascontiguousarray(out.reshape(ad.shape))
        return (out.reshape(ad.shape).astype(ad.dtype) / ad.dtype.type(255)).astype(ad.dtype)
    if ad.kind == "pil":
        return digital.pil_from_buffer(np.ascontiguousarray(out.reshape(ad.shape)), ad.ref)
    torch = _torch()
    res = torch.from_numpy(np.ascontiguousarray(np.moveaxis(out, -1, -3)))
    if ad.dtype != torch.uint8:
        res = res.to(ad.dtype) / 255
    dst = ad.ref.detach().clone()  # keeps the device and tensor subclass (tv_tensors.Image)
    dst.copy_(res.reshape(ad.shape))
    return dst


# ---------------------------------------------------------------------------------------------
# Applying one drawn operation
# ---------------------------------------------------------------------------------------------

_new_op = tuple.__new__  # Op(name, param, key) without the NamedTuple constructor's frame
_IDENTITY_OP = Op(IDENTITY, None, 0)
#: Kinds whose sampler only converts the parameter: (kind, kernel keyword, conversion).
_DIRECT_KWARG = ((color.BRIGHTNESS, "factor", float), (color.CONTRAST, "factor", float),
                 (color.GAMMA, "gamma", float), (digital.PIXELATE, "factor", float),
                 (digital.JPEG_COMPRESSION, "quality", int))
#: Noise kinds whose sampler passes the parameter and the image key.
_KEYED_NOISES = (noise.GAUSSIAN_NOISE, noise.SPECKLE_NOISE, noise.SHOT_NOISE, noise.IMPULSE_NOISE)


def _make_runner(dataset: str, corruption: str, ref_size: int):
    """``run(hwc, param, key) -> new array``: ``kind.kernel(hwc, **kind.sample(param, ctx))``.

    ``ctx = Context(hwc.shape, key, 1, ref_size)``, what :func:`medmnistc_fast.api.sample_values`
    builds. For the kinds whose sampler only converts the parameter (colour, pixelate, JPEG,
    noises) the kernel is called with that keyword directly; tests/test_augment_fast.py checks
    every such shortcut against the generic form. The pathology suites' marking takes
    :data:`~medmnistc_fast.corruptions.pathology.MARKING_RANDOM`: the blot lands at a random
    position per image (drawn from ``key``), not at the benchmark's fixed corner.
    """
    kind = kind_of(dataset, corruption)
    if dataset in registry.PATHOLOGY_SUITES and corruption == "marking":
        from .corruptions.pathology import MARKING_RANDOM

        kind = MARKING_RANDOM
    sample, kernel = kind.sample, kind.kernel

    def generic(hwc, param, key):
        return kernel(hwc, **sample(param, Context(hwc.shape, key, 1, ref_size)))

    for direct, keyword, convert in _DIRECT_KWARG:
        if kind is direct:
            return lambda hwc, param, key: kernel(hwc, **{keyword: convert(param)})
    if any(kind is k for k in _KEYED_NOISES):
        return lambda hwc, param, key: kernel(hwc, param=float(param), key=int(key))
    return generic


# ---------------------------------------------------------------------------------------------
# Randomness
# ---------------------------------------------------------------------------------------------

_AUG_TAG = zlib.crc32(b"medmnistc_fast.augment")
_STREAM_WORKER_TAG = 1
_STREAM_MAIN_TAG = 0


def _worker_seed():
    """``torch.utils.data.get_worker_info().seed`` inside a DataLoader worker, else None.

    Does not import torch: outside a process that imported it there can be no worker.
    """
    torch = _torch()
    if torch is None:
        return None
    try:
        info = torch.utils.data.get_worker_info()
    except AttributeError:  # torch partially imported
        return None
    return None if info is None else int(info.seed)


#: [pid, count]: how many seed=None transforms have started a DataLoader-worker stream in the
#: process ``pid`` (a forked worker inherits the parent's list; the pid tells it apart).
_WORKER_STREAMS: list = [None, 0]


def _next_worker_stream() -> int:
    """The number (0, 1, ...) of the next seed=None transform to start its stream in this
    DataLoader worker process."""
    pid = os.getpid()
    if _WORKER_STREAMS[0] != pid:
        _WORKER_STREAMS[:] = [pid, 0]
    k = _WORKER_STREAMS[1]
    _WORKER_STREAMS[1] = k + 1
    return k


# ---------------------------------------------------------------------------------------------
# The transform
# ---------------------------------------------------------------------------------------------

class AugMedMNISTC:
    """Random MedMNIST-C corruption as a training transform (torchvision-compatible).

    Parameters
    ----------
    dataset : str
        One of :data:`medmnistc_fast.DATASETS` or :data:`medmnistc_fast.PATHOLOGY_SUITES`; its
        corruptions and severity tables are used.
    corruptions : sequence of str, optional
        Subset of ``medmnistc_fast.corruptions(dataset)`` (default: all of them): a list,
        tuple, set or 1-D array of names.
    folds : str or sequence of str, optional
        Keep only corruptions of these categories (keys of :data:`medmnistc_fast.FOLDS`:
        'digital', 'noise', 'blur', 'color', 'task-specific'); filters ``corruptions``.
    identity : bool, default True
        Include the no-op among the choices (the reference always does).
    weights : mapping of str to float, optional
        Relative weight (>= 0) of a choice (a corruption name or ``"identity"``); choices not
        listed weigh 1. Default: uniform over the choices (the reference's rule).
    n_ops : int in 1..64 (:data:`MAX_OPS`), default 1
        Operations applied in a row per call, each chosen independently (with replacement),
        like RandAugment's N (the paper's stated future work).
    levels : (int, int), default (1, 5)
        Severity levels whose table values bound the parameter draws (see
        :func:`param_range`); a tuple, list or 1-D array of two ints.
    seed : int >= 0 or None
        Seeds the stream (and keyed mode). None: fresh OS entropy. See the module docstring for
        how DataLoader workers derive their streams.

    Raises
    ------
    TypeError
        ``dataset`` not a str; ``corruptions`` not a sequence of str (a bare str included);
        ``folds`` neither a str nor a sequence of str; ``weights`` not a mapping, or a weight not a real number (a bool included);
        ``identity`` not a bool; ``n_ops``, ``seed`` or a ``levels``
        bound not an int; ``levels`` not a pair.
    ValueError
        ``dataset`` not one of the 12 MedMNIST-C datasets or the 2 pathology suites; a
        corruption or fold unknown or not defined for ``dataset``; no choice left
        (empty ``corruptions``, folds selecting none, all weights 0); a weight negative, not
        finite or naming no choice; ``n_ops`` outside 1..64; ``levels`` not
        ``1 <= low <= high <= 5``; negative ``seed``.

    Notes
    -----
    Accepted images (:meth:`__call__`): a PIL image of mode 'L' or 'RGB'; an ndarray of shape
    ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)``; a torch tensor ``(C, H, W)`` with C = 1 or 3.
    H, W >= 8. dtype uint8, or floating with values in [0, 1] (ndarray or tensor), converted
    to uint8 by ``floor(x * 255 + 0.5)`` and back by ``/ 255`` (the corruptions are defined on
    8-bit images, so float inputs are quantised to 256 levels). The result has the input's
    type, shape, dtype (and, for tensors, device and subclass) and is always a new object;
    the input is never modified. 1-channel images are gray MedMNIST images: noises follow the
    reference's L -> RGB -> corrupt -> L pipeline, exactly as :func:`medmnistc_fast.corrupt`.

    The reference's ``AugMedMNISTC`` (``medmnistc/augmentation.py``) returns PIL for identity
    and an ndarray otherwise, rejects ndarrays for most corruptions, uses global random state,
    draws ``uniform(first, last)`` (wrong for descending tables), always applies impulse noise
    with the same fixed mask (``default_rng(99999)``), crashes below 224 px for several
    corruptions, and also uses the sixth table entries where the reference lists one; here
    only the five levels bound the draws.

    Examples
    --------
    >>> import numpy as np
    >>> from medmnistc_fast.augment import AugMedMNISTC
    >>> aug = AugMedMNISTC("pathmnist", seed=0)
    >>> x = np.zeros((28, 28, 3), np.uint8)
    >>> aug(x).shape
    (28, 28, 3)
    """

    def __init__(self, dataset: str, *, corruptions=None, folds=None, identity: bool = True,
                 weights: Mapping | None = None, n_ops: int = 1, levels=(1, 5), seed=None):
        self.dataset = _check_dataset_aug(dataset)
        if not isinstance(identity, (bool, np.bool_)):
            raise TypeError(f"identity must be a bool; got {identity!r}")
        self.levels = _check_levels(levels)
        names = _select(self.dataset, corruptions, folds)
        self.choices = tuple(names + ([IDENTITY] if identity else []))  # _select: never empty
        self.probabilities = _check_weights(weights, list(self.choices))
        self._cdf_list = np.cumsum(self.probabilities).tolist()
        if not _is_int(n_ops):
            raise TypeError(f"n_ops must be an int in 1..{MAX_OPS}; got {n_ops!r} "
                            f"({type(n_ops).__name__})")
        self.n_ops = int(n_ops)
        if not 1 <= self.n_ops <= MAX_OPS:
            raise ValueError(f"n_ops must be an int in 1..{MAX_OPS}; got {n_ops!r}")
        self.seed = check_seed(seed)
        # Keyed mode needs a seed even when none is given: drawn once, travels to workers.
        self._key_seed = rng.fresh_seed() if self.seed is None else self.seed
        self._ranges = {c: param_range(self.dataset, c, self.levels) for c in names}
        # Choices with a longest side (JPEG: libjpeg's limit), the kernels not checking it:
        # __call__ and batch check the smallest limit of the choices they can draw on every
        # image, so that a larger one fails at once rather than when JPEG comes up; apply
        # checks its ops' limits.
        self._side_limits = {c: kind_of(self.dataset, c).max_side for c in names
                             if kind_of(self.dataset, c).max_side is not None}
        self._max_side = min(((self._side_limits[c], c) for c, p in
                              zip(self.choices, self.probabilities)
                              if c in self._side_limits and p > 0), default=None)
        self._ref_size = registry.REFERENCE_SIZES[self.dataset]
        self._names = frozenset(names)
        self._epoch_bases: dict = {}
        self._gen = None
        self._owner = None
        self._stream_pid = None
        # Per-choice draw and apply functions (closures over kinds, which do not pickle) and
        # the choice table of _draw_apply_one: rebuilt lazily in each process, never pickled
        # (__getstate__).
        self._fast = None
        self._pick = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_fast"] = None
        state["_pick"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_stream_pid", None)  # objects pickled before these attributes existed
        state.setdefault("_fast", None)
        state["_pick"] = None
        self.__dict__.update(state)

    def _plans(self) -> dict:
        """{choice: (draw(g) -> param, run(hwc, param, key) -> new array)}; built on first use."""
        fast = self._fast
        if fast is None:
            fast = {name: (_make_drawer(name, self._ranges[name], _rule(self.dataset, name)),
                           _make_runner(self.dataset, name, self._ref_size))
                    for name in self._names}
            self._fast = fast
        return fast

    def _picks(self) -> list:
        """Choice table of :meth:`_draw_apply_one`: entry ``i`` (``0 <= i <= len(choices)``,
        the values of ``bisect_right(cdf, u)``) is None for identity, else ``(draw, run)`` of
        ``choices[min(i, len(choices) - 1)]`` (the choice :meth:`_draw_ops` picks for ``u``)."""
        pick = self._pick
        if pick is None:
            plans, last = self._plans(), len(self.choices) - 1
            names = [self.choices[min(i, last)] for i in range(len(self.choices) + 1)]
            pick = [None if name == IDENTITY else plans[name] for name in names]
            self._pick = pick
        return pick

    # -- randomness ---------------------------------------------------------------------------

    def _stream(self) -> np.random.Generator:
        """The generator of the current context (main process, DataLoader worker, fork)."""
        # The context can only change with the process: a DataLoader worker is its own process
        # and its worker info is set before its first call and never changes. So a call from
        # the process of the previous call keeps the generator without asking torch.
        if self._stream_pid == os.getpid():
            return self._gen
        self._gen = self._stream_slow()
        self._stream_pid = os.getpid()
        return self._gen

    def _stream_slow(self) -> np.random.Generator:
        wseed = _worker_seed()
        owner = ("worker", wseed) if wseed is not None else ("process", os.getpid())
        if owner != self._owner:
            if wseed is not None:
                if self.seed is None:
                    # Two seed=None transforms in one worker drew the same stream from wseed
                    # alone (two views of an image came out identical); the first keeps it.
                    k = _next_worker_stream()
                    entropy = wseed if k == 0 else [wseed, k]
                else:
                    entropy = [self.seed, wseed]
                seq = np.random.SeedSequence(entropy, spawn_key=(_AUG_TAG, _STREAM_WORKER_TAG))
            elif self._gen is None or self.seed is None:
                # First use, or a new process with seed=None: (fresh) entropy.
                entropy = rng.fresh_seed() if self.seed is None else self.seed
                seq = np.random.SeedSequence(entropy, spawn_key=(_AUG_TAG, _STREAM_MAIN_TAG))
            else:
                seq = None  # a copy in another process with an int seed: keep the stream
            if seq is not None:
                self._gen = np.random.Generator(np.random.PCG64(seq))
            self._owner = owner
        return self._gen

    def _keyed(self, index: int, epoch: int) -> np.random.Generator:
        base = self._epoch_bases.get(epoch)
        if base is None:
            seq = np.random.SeedSequence(
                self._key_seed, spawn_key=(_AUG_TAG, zlib.crc32(self.dataset.encode()), 2, epoch))
            base = int(seq.generate_state(1, np.uint64)[0])
            if len(self._epoch_bases) > 64:
                self._epoch_bases.clear()
            self._epoch_bases[epoch] = base
        return rng.generator(rng.image_key(base, int(index)))

    def _generator(self, index, epoch) -> np.random.Generator:
        if index is None:
            if epoch is not None:
                raise ValueError("epoch is only used with index (keyed mode); got index=None")
            return self._stream()
        index = check_nonneg_int(index, "index", upper=MAX_INDEX - 1)
        epoch = 0 if epoch is None else check_nonneg_int(epoch, "epoch")
        return self._keyed(index, epoch)

    def _draw_ops(self, g: np.random.Generator) -> tuple:
        # Inverse-CDF choice (a zero-weight choice has an empty interval and is never picked).
        # The n_ops uniforms are drawn first (one g.random(n) call, or g.random() for n = 1:
        # the same doubles), then each chosen corruption's parameter and key, in order.
        cdf, last, choices = self._cdf_list, len(self.choices) - 1, self.choices
        plans = self._plans()
        us = (g.random(),) if self.n_ops == 1 else g.random(self.n_ops).tolist()
        ops = []
        for u in us:
            name = choices[min(bisect.bisect_right(cdf, u), last)]
            if name == IDENTITY:
                ops.append(_IDENTITY_OP)
                continue
            param = plans[name][0](g)
            ops.append(_new_op(Op, (name, param, _draw_key(g))))
        return tuple(ops)

    def _draw_apply_one(self, hwc: np.ndarray, g: np.random.Generator) -> np.ndarray:
        """``_apply_hwc(hwc, _draw_ops(g), copy=False)`` for ``n_ops == 1``, without the Op
        tuples: the same draws in the same order (the choice's uniform, then its parameter,
        then its key) and the same runner. Returns ``hwc`` itself for identity."""
        pick = self._pick or self._picks()
        entry = pick[bisect.bisect_right(self._cdf_list, g.random())]
        if entry is None:
            return hwc
        draw, run = entry
        param = draw(g)
        return run(hwc, param, _draw_key(g))

    def draw(self, *, index=None, epoch=None) -> tuple:
        """Draw the operations of one call without applying them.

        Parameters
        ----------
        index, epoch : int >= 0, optional
            As in :meth:`__call__` (keyed mode when ``index`` is given; the stream advances
            otherwise).

        Returns
        -------
        tuple of Op
            ``n_ops`` operations; ``aug.apply(img, aug.draw(...))`` is what ``aug(img, ...)``
            computes.

        Raises
        ------
        TypeError
            ``index`` or ``epoch`` not an int.
        ValueError
            ``index`` outside [0, 2**63); ``epoch`` negative; ``epoch`` without ``index``.
        """
        return self._draw_ops(self._generator(index, epoch))

    def warm_up(self) -> "AugMedMNISTC":
        """Compile or load every kernel this transform can use and build all noise tables.

        Runs each choice once on small gray and RGB images and each noise corruption at every
        value of its :data:`NOISE_GRID_POINTS` grid, for RGB images and, on gray datasets, for
        gray ones too (at most 2 x 3 x 17 tables of 0.8 MB; about 8 ms each for RGB and 50 ms
        for gray). Call it in the main process before creating a DataLoader: forked workers
        then share the compiled kernels and tables instead of each building them during its
        first epoch. Draws nothing from the transform's random streams.

        Returns
        -------
        self
        """
        for channels in (1, 3):
            tiny = np.full((16, 16, channels), 128, np.uint8)
            for name in self._names:
                g = np.random.Generator(np.random.PCG64(0))  # local, fixed: not a user stream
                params = [_draw_param(g, name, self._ranges[name], _rule(self.dataset, name))]
                if name in _NOISE_NAMES and (channels == 3 or not registry.RGB[self.dataset]):
                    lo, hi = self._ranges[name][0]
                    params = [_grid_value(lo, hi, j) for j in range(NOISE_GRID_POINTS)]
                for p in params:
                    self._apply_hwc(tiny, [Op(name, p, 0)])
        return self

    # -- application --------------------------------------------------------------------------

    def _check_side(self, shape, name: str) -> None:
        """ValueError naming ``name`` if an image of ``shape`` ((H, W, C) or (N, H, W, C)) has a
        side longer than one of this transform's choices takes."""
        if self._max_side is not None:
            side, corruption = self._max_side
            check_max_side(side, shape, name, f"{corruption}, one of this transform's choices,")

    def _apply_hwc(self, hwc: np.ndarray, ops, copy: bool = True) -> np.ndarray:
        """The ops applied to ``hwc`` (C-contiguous uint8 (H, W, C)); a new array unless no op
        changed the image and ``copy`` is False (the caller owns ``hwc``)."""
        out = hwc
        plans = self._plans()
        for op in ops:
            if op.corruption == IDENTITY:
                continue
            # Context severity is unused by these samplers given explicit parameters (the only
            # severity-dependent rule, stain_deposit's ink set, receives an explicit ink side).
            out = plans[op.corruption][1](out, op.param, op.key)
        if out is hwc and copy:
            out = hwc.copy()
        return out

    def apply(self, image, ops):
        """Apply drawn operations (from :meth:`draw`) to one image.

        Parameters
        ----------
        image : PIL image, ndarray or torch tensor
            As in :meth:`__call__`.
        ops : sequence of Op (or of ``(corruption, param, key)`` triples)
            Operations of this transform's choices, each with a parameter :meth:`draw` could
            give (in the form of a severity-table entry, every component within this
            transform's :func:`param_range`; stain_deposit's ink side one of the stored sets;
            the pathology suites' marking box one of the :data:`BOX_GRID_POINTS` boxes of the
            grid, which need not hold the table's boxes: (31, 34) of ``pathology96`` level 3
            is not one, (32, 34) is) and a key, an int in ``[0, 2**64)``.

        Returns
        -------
        Same type, shape and dtype as ``image`` (new object).

        Raises
        ------
        TypeError, ValueError
            Bad image (see :meth:`__call__`; the side limit is that of the ops' corruptions:
            JPEG 65,500 px); ``ops`` not a sequence (a str, a single Op or
            None: TypeError); an identity op other than ``("identity", None, 0)``
            (ValueError); an op that is not a triple (TypeError), whose
            corruption is not one of ``self.choices``, whose parameter is outside the
            transform's ranges or of the wrong form, or whose key is not an int in
            ``[0, 2**64)`` (TypeError for a non-int).
        """
        # A bare Op is itself a 3-sequence and a str iterates by character: both used to fail
        # on "ops[0]" with its first element; None raised "'NoneType' object is not iterable".
        if isinstance(ops, (Op, str, bytes)) or not isinstance(ops, Iterable):
            hint = " (a single Op: pass [op])" if isinstance(ops, Op) else ""
            raise TypeError(f"ops must be a sequence of Op (corruption, param, key), as draw() "
                            f"returns{hint}; got {ops!r}")
        ops = [self._check_op(op, i) for i, op in enumerate(ops)]
        hwc, ad = _to_array(image, "image", batched=False)
        for op in ops:
            check_max_side(self._side_limits.get(op.corruption), hwc.shape, "image",
                           op.corruption)
        return _from_array(self._apply_hwc(hwc, ops, not ad.owned), ad)

    def _check_op(self, op, i: int) -> Op:
        """``op`` (``ops[i]`` of :meth:`apply`) checked, as an :class:`Op`.

        Hand-made ops used to reach the kernels unchecked: a JPEG quality of -5, a NaN noise
        sigma or a negative black_corner radius gave garbage images without an error.
        """
        if isinstance(op, (str, bytes)) or not isinstance(op, Sequence) or len(op) != 3:
            raise TypeError(f"ops[{i}] must be an Op (corruption, param, key); got {op!r}")
        op = Op(*op)
        if op.corruption == IDENTITY:
            # as draw() makes it; anything else is a mistake (a shifted tuple, say)
            if op.param is not None or not _is_int(op.key) or op.key != 0:
                raise ValueError(f"ops[{i}] is an identity op, whose param must be None and key "
                                 f"0 (as draw() returns it); got {op!r}")
            return _IDENTITY_OP
        if op.corruption not in self._names:
            raise ValueError(f"ops has corruption {op.corruption!r}, not among this "
                             f"transform's choices: {', '.join(map(repr, self.choices))}")
        if not _is_int(op.key):
            raise TypeError(f"ops[{i}].key must be an int in [0, 2**64); got {op.key!r}")
        if not 0 <= int(op.key) < 2**64:
            raise ValueError(f"ops[{i}].key must be an int in [0, 2**64); got {op.key!r}")
        ranges = self._ranges[op.corruption]
        rule = _rule(self.dataset, op.corruption)
        if not _param_ok(op.corruption, op.param, ranges, rule):
            if rule == "box":  # the ranges alone do not say which boxes are drawn
                boxes = ", ".join(map(str, dict.fromkeys(_boxes(ranges))))
                raise ValueError(f"ops[{i}].param {op.param!r} is not a {op.corruption} "
                                 f"parameter this transform draws: one of the (width, height) "
                                 f"boxes {boxes}")
            raise ValueError(f"ops[{i}].param {op.param!r} is not a {op.corruption} parameter "
                             f"this transform draws (rule {rule!r}, ranges "
                             f"{ranges!r})")
        return op

    def __call__(self, image, *rest, index=None, epoch=None):
        """Corrupt one image with a randomly drawn corruption (or leave it unchanged).

        Parameters
        ----------
        image : PIL.Image.Image, ndarray or torch.Tensor
            PIL mode 'L' or 'RGB'; ndarray ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)``; tensor
            ``(C, H, W)``, C in {1, 3}. uint8, or floating in [0, 1] (ndarray, tensor).
            H, W >= 8.
        *rest : any
            Further positional inputs (the target of an ``(image, target)`` sample), returned
            unchanged after the image: ``torchvision.transforms.v2.Compose`` calls each of its
            transforms with all the sample's inputs, ``aug(image, label)``.
        index : int in [0, 2**63), optional
            Sample index: keyed mode, the draws are a pure function of (seed, dataset, index,
            epoch). Default: stream mode.
        epoch : int >= 0, optional
            Epoch for keyed mode (default 0). Only with ``index``.

        Returns
        -------
        Same type, shape and dtype as ``image``; always a new object. With ``rest``, the tuple
        ``(that image, *rest)``.

        Raises
        ------
        TypeError
            Unsupported image type (a masked array included) or dtype (tensors: uint8,
            float16, bfloat16, float32 or float64); a sparse or nested tensor; non-int
            index/epoch.
        ValueError
            Bad shape or channel count, side < 8, a side longer than a choice that can be
            drawn takes (JPEG: 65,500 px, libjpeg's limit), PIL mode other than L/RGB, float
            values outside [0, 1] or not finite, a tensor on the 'meta' device, index outside
            [0, 2**63), negative epoch, epoch without index.
        """
        if rest:  # torchvision v2's (image, target, ...) call: only the image is corrupted
            return (self(image, index=index, epoch=epoch),) + rest
        g = self._stream() if index is None and epoch is None else self._generator(index, epoch)
        if self.n_ops == 1 and _is_pil(image):
            # The common training case, shortened: _to_array's PIL branch without the adapter,
            # _draw_apply_one, then _from_array's PIL branch (the array is private to the call).
            hwc = _read_pil(image, "image")
            self._check_side(hwc.shape, "image")
            out = self._draw_apply_one(hwc, g)
            return digital.pil_from_buffer(np.ascontiguousarray(out), image.mode)
        hwc, ad = _to_array(image, "image", batched=False)
        self._check_side(hwc.shape, "image")
        return _from_array(self._apply_hwc(hwc, self._draw_ops(g), not ad.owned), ad)

    def batch(self, images, *, start=None, epoch=None, num_threads=None):
        """Augment a batch with independent draws per image.

        Parameters
        ----------
        images : ndarray or torch.Tensor
            ndarray ``(N, H, W)``, ``(N, H, W, 1)`` or ``(N, H, W, 3)``; tensor
            ``(N, C, H, W)``. uint8, or floating in [0, 1].
        start : int >= 0, optional (``start + N - 1 < 2**63``)
            Keyed mode: image ``i`` uses index ``start + i``, so
            ``batch(X, start=a, epoch=e)[i]`` equals ``aug(X[i], index=a + i, epoch=e)``.
            Default: stream mode (one draw per image, in order).
        epoch : int >= 0, optional
            Epoch for keyed mode (default 0).
        num_threads : int in 1..1024, optional
            Threads to spread the images over (kernels release the GIL); the result does not
            depend on it. Default :func:`medmnistc_fast.get_num_threads`.

        Returns
        -------
        Same type, shape and dtype as ``images`` (new object).

        Raises
        ------
        TypeError
            As in :meth:`__call__` (a PIL image included: batches are arrays or tensors);
            ``start``, ``epoch`` or ``num_threads`` not an int.
        ValueError
            As in :meth:`__call__`; a 3-D ndarray that looks like one ``(H, W, C)`` image (C in
            1, 3 and H, W >= 8: add a batch axis); ``start`` negative or
            ``start + N - 1 >= 2**63``; ``epoch`` negative or given without ``start``;
            ``num_threads`` outside 1..1024.
        """
        nhwc, ad = _to_array(images, "images", batched=True)
        self._check_side(nhwc.shape, "images")
        threads = get_num_threads() if num_threads is None else _check_threads(num_threads)
        n = nhwc.shape[0]
        if start is None:
            if epoch is not None:
                raise ValueError("epoch is only used with start (keyed mode); got start=None")
            g = self._stream()
            plans = [self._draw_ops(g) for _ in range(n)]
        else:
            start = check_nonneg_int(start, "start", upper=MAX_INDEX - max(1, n))
            ep = 0 if epoch is None else check_nonneg_int(epoch, "epoch")
            plans = [self._draw_ops(self._keyed(start + i, ep)) for i in range(n)]
        out = np.empty_like(nhwc)

        def run(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = self._apply_hwc(nhwc[i], plans[i], copy=False)

        _run_chunks(run, n, threads)
        return _from_array(out, ad)

    def __repr__(self) -> str:
        # Non-uniform weights change what the transform does: show the resulting probabilities
        # (two transforms differing only in weights= printed the same).
        probs = self.probabilities
        weighted = ("" if np.allclose(probs, probs[0], rtol=0, atol=1e-12) else
                    f", probabilities={[round(float(p), 4) for p in probs]!r}")
        return (f"{type(self).__name__}(dataset={self.dataset!r}, choices={list(self.choices)!r}"
                f"{weighted}, n_ops={self.n_ops}, levels={self.levels}, seed={self.seed!r})")


# ---------------------------------------------------------------------------------------------
# Keyed mode in data loaders
# ---------------------------------------------------------------------------------------------

class AugmentedDataset:
    """A map-style dataset applying an :class:`AugMedMNISTC` keyed by (sample index, epoch).

    The output is a pure function of (transform seed, index, epoch) and the sample: it does not
    depend on the number of DataLoader workers, the batch size or the order. Works with a torch
    ``DataLoader`` (which needs only ``__getitem__`` and ``__len__``) without importing torch.

    Parameters
    ----------
    dataset : indexable
        ``dataset[i]`` is an image or a tuple whose first element is the image (for example a
        ``medmnist`` dataset with ``transform=None``, which returns ``(PIL image, label)``), or
        an ndarray of images ``(N, H, W[, C])``.
    augment : AugMedMNISTC
    transform : callable, optional
        Applied to the augmented image (for example ``torchvision.transforms.ToTensor()``).
    epoch : int >= 0, default 0
        Current epoch; change it with :meth:`set_epoch` before creating each epoch's iterator.

    Raises
    ------
    TypeError
        ``augment`` not an :class:`AugMedMNISTC`; ``dataset`` without ``len()`` or indexing;
        ``transform`` not callable; ``epoch`` not an int. Indexing raises IndexError outside
        ``-len(dataset)..len(dataset) - 1``, TypeError for a non-int index or epoch (0-d
        integer arrays and tensors count as ints) and ValueError for a negative epoch. A
        negative index counts from the end, as in a sequence (``dataset[-1]`` is
        ``dataset[len - 1]``, keyed by ``len - 1``).
    ValueError
        Negative ``epoch``.

    Notes
    -----
    ``set_epoch`` changes this object in the main process; DataLoader workers copy it when an
    iterator starts, so it reaches them with the default ``persistent_workers=False``. With
    persistent workers, pass the epoch through the sampler instead: wrap it in
    :class:`EpochSampler` (``dataset[(i, epoch)]`` is accepted).
    """

    def __init__(self, dataset, augment: AugMedMNISTC, *, transform=None, epoch: int = 0):
        if not isinstance(augment, AugMedMNISTC):
            raise TypeError(f"augment must be an AugMedMNISTC; got {type(augment).__name__}")
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError("dataset must support len() and indexing; got "
                            f"{type(dataset).__name__}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable or None; got {type(transform).__name__}")
        self.dataset = dataset
        self.augment = augment
        self.transform = transform
        self.epoch = check_nonneg_int(epoch, "epoch")

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch used for keys from now on.

        Parameters
        ----------
        epoch : int >= 0
            The ``epoch`` of the keyed draws ``augment(image, index=i, epoch=epoch)`` of the
            items indexed by ``i`` alone.

        Raises
        ------
        TypeError
            ``epoch`` not an int (bools included).
        ValueError
            ``epoch`` negative.
        """
        self.epoch = check_nonneg_int(epoch, "epoch")

    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({type(self.dataset).__name__} of {len(self)}, "
                f"{self.augment!r}, transform={self.transform!r}, epoch={self.epoch})")

    def __getitem__(self, item):
        """``(augmented image, *rest)`` for ``item = i`` or ``item = (i, epoch)``."""
        if isinstance(item, tuple) and len(item) == 2:
            index, epoch = scalar_of(item[0]), check_nonneg_int(scalar_of(item[1]), "epoch")
        else:
            index, epoch = scalar_of(item), self.epoch
        n = len(self.dataset)
        if not _is_int(index):
            raise TypeError(f"index must be an int in -{n}..{n - 1} (or a 0-d integer array or "
                            f"tensor); got {index!r} ({type(index).__name__})")
        index = int(index)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n}")
        if index < 0:
            index += n
        sample = self.dataset[index]
        is_tuple = isinstance(sample, tuple)
        image = sample[0] if is_tuple else sample
        image = self.augment(image, index=index, epoch=epoch)
        if self.transform is not None:
            image = self.transform(image)
        return (image,) + tuple(sample[1:]) if is_tuple else image


class EpochSampler:
    """Wrap an index sampler to yield ``(index, epoch)`` pairs for :class:`AugmentedDataset`.

    Needed only with ``persistent_workers=True`` (where the dataset's epoch cannot reach the
    workers); the sampler lives in the main process.

    Parameters
    ----------
    sampler : iterable of int, or int
        Any sampler (``torch.utils.data.RandomSampler(ds)``) or iterable of indices; an int n
        (or a 0-d integer array or tensor) means ``range(n)``.
    epoch : int >= 0, default 0
        Also a 0-d integer array or tensor, here and in :meth:`set_epoch`.

    Raises
    ------
    TypeError
        ``sampler`` neither an iterable nor an int, a str / bytes, or a one-shot iterator
        (empty after one epoch); ``epoch`` not an int; iterating raises TypeError when the
        sampler yields a non-int, ``len()`` when the sampler has no length.
    ValueError
        Negative ``sampler`` int or ``epoch``.
    """

    def __init__(self, sampler, epoch: int = 0):
        # A 0-d integer array or tensor is its int (torch.tensor(3) is Iterable, but iterating
        # it raises); 0-d floats and bools stay TypeErrors.
        sampler, epoch = scalar_of(sampler), scalar_of(epoch)
        if not _is_int(sampler) and (not isinstance(sampler, Iterable)
                                     or isinstance(sampler, (str, bytes))):
            raise TypeError("sampler must be an iterable of indices (e.g. a torch Sampler) or an "
                            f"int n (meaning range(n)); got {sampler!r}")
        if isinstance(sampler, Iterator):
            # A one-shot iterator would be empty from the second epoch on, silently.
            raise TypeError("sampler must be re-iterable (a Sampler, sequence or range), not a "
                            f"one-shot iterator; got {type(sampler).__name__}")
        self.sampler = range(check_nonneg_int(sampler, "sampler")) if _is_int(sampler) else sampler
        self.epoch = check_nonneg_int(epoch, "epoch")

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch paired with the indices from now on; also forwarded to the wrapped
        sampler when it has ``set_epoch`` (``DistributedSampler``).

        Parameters
        ----------
        epoch : int >= 0
            Also a 0-d integer array or tensor.

        Raises
        ------
        TypeError
            ``epoch`` not an int (bools included).
        ValueError
            ``epoch`` negative.
        """
        self.epoch = check_nonneg_int(scalar_of(epoch), "epoch")
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)

    def __iter__(self):
        epoch = self.epoch
        for i in self.sampler:
            try:
                index = operator.index(i)  # ints, numpy and 0-d torch integers; not 1.7 -> 1
            except TypeError:
                raise TypeError(f"sampler must yield int indices; got {i!r} "
                                f"({type(i).__name__})") from None
            yield (index, epoch)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sampler!r}, epoch={self.epoch})"

    def __len__(self) -> int:
        if not hasattr(self.sampler, "__len__"):
            raise TypeError(f"len() of an EpochSampler needs a sampler with a length; "
                            f"{type(self.sampler).__name__} has none")
        return len(self.sampler)
