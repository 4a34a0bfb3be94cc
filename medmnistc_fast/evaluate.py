"""Evaluation metrics for corruption benchmarks (pure NumPy).

Two families of metrics live here.

MedMNIST-C (Di Salvo et al., 2024)
    :func:`balanced_accuracy` and :func:`balanced_error` for the four MedMNIST task types, and
    :func:`evaluate_robustness`, which turns a model's scores on the clean test split and on the generated
    corrupted files into the benchmark's normalised numbers BE and rBE (relative to the AlexNet baseline
    shipped with the reference implementation) and returns a :class:`RobustnessReport`.

Digital pathology (Zhang et al., 2022)
    :func:`top1_error`, :func:`top1_errors_by_severity`, :func:`corruption_error` (CE),
    :func:`mean_corruption_error` (mCE), :func:`relative_corruption_error` (rCE),
    :func:`top1_confidence` and :func:`corruption_error_of_confidence` (CEC).

Conventions
-----------
- Corrupted scores are severity-major, like the files written by dataset generation: for a clean split of
  ``N`` samples, rows ``[s*N:(s+1)*N]`` of a ``(5N, K)`` array belong to severity ``s + 1``.
- Errors are fractions in ``[0, 1]`` (the papers print them as percentages).
- Inputs are never modified. Nothing here draws random numbers or prints; the one warning is for binary
  and multi-label scores outside ``[0, 1]`` under a probability threshold (logits, see
  :func:`balanced_accuracy`).
- Array arguments are array_like; a masked array, or a sequence (list, tuple, deque...) holding one at any
  depth, is a ``TypeError`` (``np.asarray`` would drop its mask and the metrics would count the masked
  entries), and so is one given as a threshold or a scalar error
  (``np.ma.masked`` and 0-d masked arrays: ``float()`` would read a masked value as NaN).
- A metric whose denominator is zero raises ``ValueError`` naming the argument that makes it zero; no
  function returns NaN or infinity.

References
----------
.. [1] F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved classifier
       robustness by simulating realistic image corruptions", arXiv:2406.17536, 2024.
.. [2] The reference implementation, medmnistc 0.1.0, ``medmnistc/eval.py`` (``Evaluator``) and
       ``medmnistc/utils/baselines.py``, https://github.com/francescodisalvo05/medmnistc-api
.. [3] Y. Zhang, Y. Sun, H. Li, S. Zheng, C. Zhu, L. Yang, "Benchmarking the robustness of deep neural
       networks to common corruptions in digital pathology", MICCAI 2022, arXiv:2206.14973.
.. [4] K. H. Brodersen, C. S. Ong, K. E. Stephan, J. M. Buhmann, "The balanced accuracy and its posterior
       distribution", ICPR 2010 (the definition used by scikit-learn's ``balanced_accuracy_score``).
.. [5] D. Hendrycks, T. Dietterich, "Benchmarking neural network robustness to common corruptions and
       perturbations", ICLR 2019 (CE, mCE and relative CE).
"""

from __future__ import annotations

import csv
import io
import json
import numbers
import os
import warnings
from dataclasses import dataclass, fields
from itertools import chain
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._fileio import write_text_atomic
from ._validation import _is_int, check_path, reject_masked, to_float
from ._baselines import ALEXNET_BASELINES, DATASET_CORRUPTIONS, DATASET_N_CLASSES, DATASET_TASKS, TASKS

__all__ = [
    "N_SEVERITIES",
    "TASKS",
    "RobustnessReport",
    "balanced_accuracy",
    "balanced_error",
    "corruption_error",
    "corruption_error_of_confidence",
    "evaluate_robustness",
    "mean_corruption_error",
    "relative_corruption_error",
    "top1_confidence",
    "top1_error",
    "top1_errors_by_severity",
]

#: Number of severity levels of MedMNIST-C and of the pathology suite.
N_SEVERITIES = 5

_MULTI_LABEL = "multi-label, binary-class"
_BINARY = "binary-class"

Threshold = Union[float, Sequence[float]]


# --------------------------------------------------------------------------------------------------------
# Validation helpers (argument-named messages; they never write into their inputs)
# --------------------------------------------------------------------------------------------------------


def _is_nested(t: type) -> bool:
    """Whether ``np.asarray`` reads objects of type ``t`` as nested sequences (lists, tuples, deques, other
    ``collections.abc.Sequence``; not str or bytes)."""
    return issubclass(t, Sequence) and not issubclass(t, (str, bytes, bytearray))


#: Nesting levels searched for masked arrays: NumPy arrays have at most 64 dimensions, so a sequence nested
#: deeper never converts to a numeric array (the dtype checks refuse the object array it gives).
_MAX_NESTING = 64


def _masked_inside(x: Any) -> bool:
    """Whether a sequence holds a masked array at any depth (``np.asarray`` drops their masks).

    One level at a time, each distinct sequence once, at most :data:`_MAX_NESTING` levels: a list nested a
    thousand times, or holding itself, gives NumPy's error rather than a RecursionError or a loop."""
    level = [x]
    for _ in range(_MAX_NESTING + 1):
        items = list(chain.from_iterable(level))
        types = set(map(type, items))
        if any(issubclass(t, np.ma.MaskedArray) for t in types):
            return True
        nested = {t for t in types if _is_nested(t)}
        if not nested:
            return False
        level = list({id(e): e for e in items if type(e) in nested}.values())
    return False


def _as_array(x: Any, name: str) -> np.ndarray:
    """``np.asarray(x)``, with NumPy's error for ragged nested sequences re-raised naming ``name``; a masked
    array, or a sequence (list, tuple, deque...) holding one, is a TypeError (``np.asarray`` would drop the
    mask and count the masked entries)."""
    why = "the metrics would count its masked entries"
    reject_masked(x, name, why=why, fix=", or drop the masked rows")
    if _is_nested(type(x)) and _masked_inside(x):
        raise TypeError(f"{name} must not hold masked arrays: {why}; pass plain arrays "
                        f"(each .filled(value) or .data), or drop the masked rows")
    try:
        return np.asarray(x)
    except ValueError as e:  # "inhomogeneous shape", which does not say which argument
        raise ValueError(f"{name} cannot be read as a rectangular array: {e}") from None


def _check_task(task: Any) -> str:
    if not isinstance(task, str):
        raise TypeError(f"task must be a str, one of {list(TASKS)}; got {type(task).__name__}")
    if task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}; got {task!r}")
    return task


def _is_real_scalar(x: Any) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, numbers.Real):
        return True
    return isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf"


#: Why a masked scalar or threshold is refused (float() reads a masked value as NaN with a warning).
_MASKED_SCALAR = "its mask would be ignored, or a masked value read as NaN"


def _check_unit_scalar(x: Any, name: str) -> float:
    """A real number in [0, 1] (an error rate)."""
    reject_masked(x, name, why=_MASKED_SCALAR, want="a real number in [0, 1]")
    if not _is_real_scalar(x):
        raise TypeError(f"{name} must be a real number in [0, 1]; got {type(x).__name__}")
    value = to_float(x)
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be a real number in [0, 1]; got {value!r}")
    return value


def _check_labels(y_true: Any, task: str, name: str = "y_true") -> np.ndarray:
    """Return the labels as int64: ``(N,)`` for single-label tasks, ``(N, L)`` for multi-label."""
    y = _as_array(y_true, name)
    kind = y.dtype.kind
    if kind not in "buif":
        raise TypeError(f"{name} must hold integer class labels (integer, bool or integral float dtype); "
                        f"got dtype {y.dtype}")
    if y.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (N,), (N, 1) or (N, L); got shape {y.shape}")
    if y.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one sample; got shape {y.shape}")
    if kind == "f":
        if not np.all(np.isfinite(y)) or not np.array_equal(y, np.floor(y)):
            raise ValueError(f"{name} must hold integer class labels; got non-integral float values")
    if kind in "uf":
        # Checked before the int64 cast, which would wrap (uint64) or warn and saturate (float).
        lo, hi = y.min(), y.max()
        if hi >= 2.0**63 or lo < -(2.0**63):
            bad = hi if hi >= 2.0**63 else lo
            raise ValueError(f"{name} must hold class labels; got {bad!r}, outside the int64 range")
    if task == _MULTI_LABEL:
        y2 = y.reshape(-1, 1) if y.ndim == 1 else y
        if y2.shape[1] == 0:
            raise ValueError(f"{name} must hold at least one label column; got shape {y.shape}")
        out = y2.astype(np.int64)
        if np.any((out != 0) & (out != 1)):
            raise ValueError(f"{name} must hold 0/1 labels for task {task!r}")
        return out
    if y.ndim == 2 and y.shape[1] != 1:
        raise ValueError(f"{name} must have shape (N,) or (N, 1) for task {task!r}; got shape {y.shape} "
                         f"(use task={_MULTI_LABEL!r} for several label columns)")
    out = y.reshape(-1).astype(np.int64)
    if task == _BINARY:
        if np.any((out != 0) & (out != 1)):
            raise ValueError(f"{name} must hold 0/1 labels for task {task!r}")
    elif np.any(out < 0):
        raise ValueError(f"{name} must hold class labels >= 0; got {int(out.min())}")
    return out


def _check_scores(y_score: Any, task: str, n_rows: int, name: str) -> np.ndarray:
    """Validate scores; return ``(rows,)`` for binary (positive-class score), else ``(rows, K)``.

    The result is the input or a view of it (never a copy that could be confused with it); it is only read.
    """
    s = _as_array(y_score, name)
    if s.dtype.kind not in "buif":
        raise TypeError(f"{name} must be a real-valued array (scores or probabilities); got dtype {s.dtype}")
    if s.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (N,) or (N, K); got shape {s.shape}")
    if s.shape[0] != n_rows:
        raise ValueError(f"{name} must have {n_rows} rows to match the labels; got shape {s.shape}")
    if s.ndim == 2 and s.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column; got shape {s.shape}")
    if s.dtype.kind == "f" and np.isnan(s).any():
        raise ValueError(f"{name} contains NaN")
    if task == _BINARY:
        if s.ndim == 2:
            if s.shape[1] not in (1, 2):
                raise ValueError(f"{name} must have shape (N,), (N, 1) or (N, 2) for task {task!r}; "
                                 f"got shape {s.shape}")
            s = s[:, -1]
        return s
    if task == _MULTI_LABEL:
        return s.reshape(-1, 1) if s.ndim == 1 else s
    if s.ndim != 2:
        raise ValueError(f"{name} must have shape (N, K) for task {task!r}; got shape {s.shape}")
    return s


def _check_label_range(y: np.ndarray, s: np.ndarray, task: str, y_name: str, s_name: str) -> None:
    if task == _MULTI_LABEL:
        if s.shape[1] != y.shape[1]:
            raise ValueError(f"{s_name} must have one column per label of {y_name} ({y.shape[1]}); "
                             f"got shape {s.shape}")
    elif task != _BINARY:
        n_classes = s.shape[1]
        if int(y.max()) >= n_classes:
            raise ValueError(f"{y_name} holds label {int(y.max())} but {s_name} has only {n_classes} "
                             f"columns (classes 0..{n_classes - 1})")


def _check_threshold(threshold: Any, task: str, n_labels: int) -> Union[float, np.ndarray, None]:
    """``None`` for argmax tasks (threshold ignored), a float for binary, ``(L,)`` float64 for multi-label."""
    if task not in (_BINARY, _MULTI_LABEL):
        return None
    reject_masked(threshold, "threshold", why=_MASKED_SCALAR,
                  want="a real number or a sequence of real numbers")
    if _is_real_scalar(threshold):
        value = to_float(threshold)
        if not np.isfinite(value):  # +-inf would make a report that to_json cannot write
            raise ValueError(f"threshold must be a finite real number; got {value!r}")
        return value if task == _BINARY else np.full(n_labels, value)
    if task == _BINARY:
        raise TypeError(f"threshold must be a real number for task {task!r}; got {type(threshold).__name__}")
    if isinstance(threshold, (str, bytes)) or not isinstance(threshold, (Sequence, np.ndarray)):
        raise TypeError(f"threshold must be a real number or a sequence of {n_labels} real numbers for task "
                        f"{task!r}; got {type(threshold).__name__}")
    t = _as_array(threshold, "threshold")
    if t.dtype.kind not in "iuf" or t.ndim != 1:
        raise TypeError(f"threshold must be a real number or a sequence of {n_labels} real numbers for task "
                        f"{task!r}; got {t.dtype} array of shape {t.shape}")
    if t.shape[0] != n_labels:
        raise ValueError(f"threshold must have one value per label ({n_labels}); got {t.shape[0]}")
    t = t.astype(np.float64)
    if not np.isfinite(t).all():
        raise ValueError(f"threshold must hold finite real numbers; got {threshold!r}")
    return t


def _warn_if_not_probabilities(scores: Mapping[str, np.ndarray], thr: Union[float, np.ndarray, None],
                               stacklevel: int) -> None:
    """UserWarning when thresholded scores leave [0, 1] while every threshold lies in (0, 1).

    Binary and multi-label predictions are ``score > threshold``; a probability threshold such as the
    default 0.5 applied to logits (or other unbounded scores) silently moves the operating point. Scores in
    [0, 1] or a threshold outside (0, 1) (chosen for unbounded scores, e.g. 0 for logits) stay silent.
    """
    t = np.asarray(thr)
    if thr is None or not bool(np.all((t > 0.0) & (t < 1.0))):
        return
    for name, s in scores.items():
        if not s.size:
            continue
        low, high = s.min(), s.max()
        if low < 0 or high > 1:
            lo, hi = _bound_text(low), _bound_text(high)
            warnings.warn(f"{name} has values outside [0, 1] (min {lo}, max {hi}) "
                          f"but the threshold is a probability ({_threshold_text(thr)}): predictions are "
                          f"score > threshold, so logits need a sigmoid first (or pass threshold=0 for "
                          f"logits)", UserWarning, stacklevel=stacklevel + 1)
            return


def _bound_text(v: Any) -> str:
    """``v`` with 4 significant digits, or in full where rounding would carry it into or out of [0, 1]
    (a max of 1 + 2.2e-16 is not shown as 1)."""
    v = float(v)
    short = f"{v:.4g}"
    return short if (0.0 <= float(short) <= 1.0) == (0.0 <= v <= 1.0) else repr(v)


def _threshold_text(thr: Union[float, np.ndarray]) -> str:
    return f"{thr:g}" if isinstance(thr, float) else "[" + ", ".join(f"{t:g}" for t in thr) + "]"


# --------------------------------------------------------------------------------------------------------
# Balanced accuracy kernels (no validation)
# --------------------------------------------------------------------------------------------------------


def _multiclass_ba(y: np.ndarray, pred: np.ndarray, n_classes: int) -> float:
    """Mean over the classes present in ``y`` of the per-class recall."""
    support = np.bincount(y, minlength=n_classes)
    hits = np.bincount(y[pred == y], minlength=n_classes)
    present = support > 0
    return float(np.mean(hits[present] / support[present]))


def _binary_ba_per_label(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Per-column binary balanced accuracy; ``y`` int 0/1 and ``pred`` bool, both ``(N, L)``."""
    n = y.shape[0]
    pos = np.count_nonzero(y, axis=0)
    neg = n - pos
    yb = y.astype(bool)
    tp = np.count_nonzero(yb & pred, axis=0)
    tn = np.count_nonzero(~yb & ~pred, axis=0)
    # Recall of a class absent from y_true is excluded from the mean (scikit-learn's definition).
    rec_pos = np.where(pos > 0, tp / np.maximum(pos, 1), 0.0)
    rec_neg = np.where(neg > 0, tn / np.maximum(neg, 1), 0.0)
    n_present = (pos > 0).astype(np.int64) + (neg > 0)
    return (rec_neg + rec_pos) / n_present


def _ba_kernel(y: np.ndarray, s: np.ndarray, task: str, thr: Union[float, np.ndarray, None]) -> float:
    if task == _BINARY:
        pred = (s > thr).reshape(-1, 1)
        return float(_binary_ba_per_label(y.reshape(-1, 1), pred)[0])
    if task == _MULTI_LABEL:
        return float(np.mean(_binary_ba_per_label(y, s > thr)))
    return _multiclass_ba(y, np.argmax(s, axis=1), s.shape[1])


# --------------------------------------------------------------------------------------------------------
# Balanced accuracy (public)
# --------------------------------------------------------------------------------------------------------


def balanced_accuracy(y_true: Any, y_score: Any, task: str, threshold: Threshold = 0.5) -> float:
    """Balanced accuracy of scores under a MedMNIST task type.

    The balanced accuracy is the mean, over the classes present in ``y_true``, of the per-class recall
    (scikit-learn's ``balanced_accuracy_score``, without adjustment): a class that is predicted but absent
    from ``y_true`` does not enter the mean. Predictions are made from the scores as in the reference
    Evaluator [2]_:

    - ``"binary-class"``: positive if ``y_score[:, -1] > threshold`` (or ``y_score > threshold`` when
      ``y_score`` is 1-D);
    - ``"multi-class"`` and ``"ordinal-regression"``: ``argmax(y_score, axis=1)``; ``threshold`` is ignored;
    - ``"multi-label, binary-class"``: label ``l`` is positive if ``y_score[:, l] > threshold[l]``; the
      result is the mean over labels of the per-label binary balanced accuracy.

    Parameters
    ----------
    y_true : array_like, shape (N,), (N, 1) or (N, L), integer, bool or integral float
        True labels: class indices ``0..K-1`` for multi-class and ordinal tasks, 0/1 for binary tasks,
        ``(N, L)`` 0/1 indicators for multi-label (a 1-D array there means ``L = 1``).
    y_score : array_like, shape (N,), (N, 1), (N, 2) or (N, K), real
        Scores or probabilities. Binary: ``(N,)``, ``(N, 1)`` or ``(N, 2)`` (the last column is the positive
        class). Multi-class and ordinal: ``(N, K)`` with ``K`` greater than every label. Multi-label:
        same shape as ``y_true``. Must not contain NaN.
    task : {"binary-class", "multi-class", "ordinal-regression", "multi-label, binary-class"}
        MedMNIST task string (``INFO[flag]["task"]``).
    threshold : float or sequence of float, default 0.5
        Operating point, finite. A float for binary tasks; a float (used for every label) or one value per
        label for multi-label. Ignored for multi-class and ordinal tasks.

    Returns
    -------
    float
        Balanced accuracy in ``[0, 1]``.

    Raises
    ------
    TypeError
        If ``task`` is not a str, the labels or scores are a masked array or have a non-numeric dtype, or
        ``threshold`` has the wrong type (a masked array included).
    ValueError
        If ``task`` is unknown; if shapes are wrong or disagree (row counts, label columns); if labels are
        negative, non-integral, not 0/1 where required, or not below the number of score columns; if
        ``y_score`` contains NaN or ``threshold`` is not finite (NaN or infinity); if there are no samples.

    Warns
    -----
    UserWarning
        For binary and multi-label tasks, if ``y_score`` has values outside ``[0, 1]`` while every threshold
        lies in ``(0, 1)``: logits compared with a probability threshold such as the default 0.5 move the
        operating point (apply a sigmoid first, or pass ``threshold=0`` for logits).

    See Also
    --------
    balanced_error : ``1 - balanced_accuracy``.

    References
    ----------
    .. [2] medmnistc 0.1.0, ``medmnistc/eval.py``, ``Evaluator.get_eval_metric``.
    .. [4] Brodersen et al., "The balanced accuracy and its posterior distribution", ICPR 2010.

    Examples
    --------
    >>> import numpy as np
    >>> y = [0, 0, 1, 2, 2, 2]
    >>> scores = np.eye(3)[[0, 0, 0, 2, 2, 1]]  # recalls 1, 0, 2/3
    >>> round(balanced_accuracy(y, scores, "multi-class"), 6)
    0.555556
    """
    return _balanced_accuracy(y_true, y_score, task, threshold, stacklevel=3)


def _balanced_accuracy(y_true: Any, y_score: Any, task: Any, threshold: Any, stacklevel: int) -> float:
    """:func:`balanced_accuracy`. With ``stacklevel=3`` its warning names the line that called the public
    function (balanced_accuracy or balanced_error) that called this one."""
    task = _check_task(task)
    y = _check_labels(y_true, task, "y_true")
    s = _check_scores(y_score, task, y.shape[0], "y_score")
    _check_label_range(y, s, task, "y_true", "y_score")
    thr = _check_threshold(threshold, task, y.shape[1] if y.ndim == 2 else 1)
    _warn_if_not_probabilities({"y_score": s}, thr, stacklevel=stacklevel)
    return _ba_kernel(y, s, task, thr)


def balanced_error(y_true: Any, y_score: Any, task: str, threshold: Threshold = 0.5) -> float:
    """Balanced error ``1 - balanced_accuracy(y_true, y_score, task, threshold)``.

    This is the error of the MedMNIST-C benchmark [1]_.

    Parameters
    ----------
    y_true, y_score, task, threshold
        As in :func:`balanced_accuracy`.

    Returns
    -------
    float
        Balanced error in ``[0, 1]``.

    Raises
    ------
    TypeError, ValueError
        As in :func:`balanced_accuracy`.

    References
    ----------
    .. [1] Di Salvo, Doerrich, Ledig, "MedMNIST-C", arXiv:2406.17536, 2024.
    """
    return 1.0 - _balanced_accuracy(y_true, y_score, task, threshold, stacklevel=3)


# --------------------------------------------------------------------------------------------------------
# MedMNIST-C robustness report
# --------------------------------------------------------------------------------------------------------


#: Largest JSON indentation accepted by :meth:`RobustnessReport.to_json` (spaces per level).
_MAX_INDENT = 16


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def _md_text(name: str) -> str:
    """``name`` as markdown table text: ``|`` escaped (a custom baseline allows any dataset and
    corruption names; a bare ``|`` would split the cell) and line breaks as spaces."""
    return " ".join(str(name).replace("\\", "\\\\").replace("|", "\\|").split())


@dataclass(frozen=True)
class RobustnessReport:
    """Result of :func:`evaluate_robustness` (immutable; mappings are read-only and ordered).

    All errors are balanced errors (``1 - balanced accuracy``) as fractions in ``[0, 1]``. Mappings are
    keyed by corruption name, in the dataset's reference order restricted to the evaluated corruptions
    (for a custom baseline, the order of its ``errors`` mapping).
    Instances are unhashable (they hold mappings).

    Attributes
    ----------
    dataset : str
        Dataset name (MedMNIST flag, or any name when a custom baseline was given).
    task : str
        MedMNIST task string used to turn scores into predictions.
    baseline : str
        ``"alexnet"`` or ``"custom"``.
    n_samples : int
        Number of clean test samples ``N``.
    threshold : float, tuple of float or None
        Operating point used: a float for binary tasks, one value per label for multi-label, ``None`` for
        argmax tasks.
    corruptions : tuple of str
        Evaluated corruptions.
    clean_error, clean_balanced_accuracy : float
        ``E_clean`` and ``1 - E_clean``.
    errors : mapping of str to tuple of 5 float
        ``E_{s,c}`` for severities 1..5.
    balanced_accuracies : mapping of str to tuple of 5 float
        ``1 - E_{s,c}``.
    mean_errors : mapping of str to float
        ``E_c``, the mean of ``errors[c]`` over the five severities.
    be : mapping of str to float
        ``BE_c = E_c / E_c(baseline)``.
    rbe : mapping of str to float
        ``rBE_c = (E_c - E_clean) / (E_c(baseline) - E_clean(baseline))``. Negative when the model does
        better on corrupted than on clean images and the baseline does not (or vice versa).
    mean_error : float
        Mean of ``E_c`` over the evaluated corruptions.
    mean_be, mean_rbe : float
        BE and rBE: means of ``BE_c`` and ``rBE_c`` over the evaluated corruptions.
    baseline_clean_error : float
        ``E_clean(baseline)``.
    baseline_errors : mapping of str to float
        ``E_c(baseline)`` for the evaluated corruptions.
    """

    dataset: str
    task: str
    baseline: str
    n_samples: int
    threshold: Union[float, Tuple[float, ...], None]
    corruptions: Tuple[str, ...]
    clean_error: float
    clean_balanced_accuracy: float
    errors: Mapping[str, Tuple[float, ...]]
    balanced_accuracies: Mapping[str, Tuple[float, ...]]
    mean_errors: Mapping[str, float]
    be: Mapping[str, float]
    rbe: Mapping[str, float]
    mean_error: float
    mean_be: float
    mean_rbe: float
    baseline_clean_error: float
    baseline_errors: Mapping[str, float]

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    def __reduce__(self):
        """Pickle and ``copy.deepcopy`` support (``mappingproxy`` itself cannot be pickled).

        The read-only mappings travel as plain dicts and are wrapped again by
        :func:`_report_from_fields`, so a report can be returned from a worker process or cached.
        """
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        plain = {k: dict(v) if isinstance(v, MappingProxyType) else v for k, v in values.items()}
        return (_report_from_fields, (plain,))

    def to_dict(self) -> dict:
        """Return the report as plain JSON-ready Python data (dicts, lists, str, int, float, None).

        Returns
        -------
        dict
            Keys ``dataset``, ``task``, ``baseline``, ``n_samples``, ``threshold``, ``severities``
            (``[1, 2, 3, 4, 5]``), ``clean`` (``error``, ``balanced_accuracy``), ``summary`` (``be``,
            ``rbe``, ``mean_error``, ``clean_error``), ``corruptions`` (per corruption: ``errors``,
            ``balanced_accuracies``, ``mean_error``, ``be``, ``rbe``, ``baseline_error``) and
            ``baseline_clean_error``.
        """
        thr = self.threshold
        return {
            "dataset": self.dataset,
            "task": self.task,
            "baseline": self.baseline,
            "n_samples": int(self.n_samples),
            "threshold": list(thr) if isinstance(thr, tuple) else thr,
            "severities": list(range(1, N_SEVERITIES + 1)),
            "clean": {"error": self.clean_error, "balanced_accuracy": self.clean_balanced_accuracy},
            "summary": {
                "be": self.mean_be,
                "rbe": self.mean_rbe,
                "mean_error": self.mean_error,
                "clean_error": self.clean_error,
            },
            "corruptions": {
                c: {
                    "errors": list(self.errors[c]),
                    "balanced_accuracies": list(self.balanced_accuracies[c]),
                    "mean_error": self.mean_errors[c],
                    "be": self.be[c],
                    "rbe": self.rbe[c],
                    "baseline_error": self.baseline_errors[c],
                }
                for c in self.corruptions
            },
            "baseline_clean_error": self.baseline_clean_error,
        }

    def to_json(self, path: Union[str, "os.PathLike[str]"], *, indent: int = 2) -> Path:
        """Write :meth:`to_dict` as JSON to ``path`` atomically.

        The JSON is written to a temporary file in the destination folder, flushed to disk, and moved onto
        ``path`` with ``os.replace``, so readers see either the old file or the complete new one.

        Parameters
        ----------
        path : str or path-like
            Destination file (a leading ``~`` expanded); its folder must exist.
        indent : int in 0..16, keyword-only, default 2
            Spaces per JSON indentation level.

        Returns
        -------
        pathlib.Path
            ``path`` (``~`` expanded).

        Raises
        ------
        TypeError
            If ``path`` is not a str or path-like, or ``indent`` not an int.
        ValueError
            If ``indent`` is outside 0..16.
        IsADirectoryError
            If ``path`` is an existing folder or ends with a path separator.
        OSError
            If the folder does not exist or is not writable (no temporary file is left behind).
        """
        dest = _report_path(path, "report.json")
        # json.dumps also takes a str indent (that text at the start of every line) and negative
        # ints; "x" wrote a file that is not JSON.
        if not _is_int(indent):
            raise TypeError(f"indent must be an int in 0..{_MAX_INDENT}; got {indent!r} "
                            f"({type(indent).__name__})")
        if not 0 <= indent <= _MAX_INDENT:
            raise ValueError(f"indent must be an int in 0..{_MAX_INDENT}; got {indent!r}")
        text = json.dumps(self.to_dict(), indent=int(indent), allow_nan=False) + "\n"
        write_text_atomic(dest, text)
        return dest

    def to_markdown(self, digits: int = 4,
                    path: Union[str, "os.PathLike[str]", None] = None) -> Union[str, Path]:
        """Return markdown tables: a summary, errors per corruption and severity, balanced accuracies.

        Parameters
        ----------
        digits : int in 0..17, default 4
            Decimal places (values are fractions, not percentages). Fixed decimal places round
            small values (17 places keep every digit only from 0.1 up); :meth:`to_csv` and
            :meth:`to_json` hold the exact values.
        path : str or path-like, optional
            If given, the text is written there (atomically, as :meth:`to_json` writes)
            and the path is returned instead of the text.

        Returns
        -------
        str, or pathlib.Path when ``path`` is given
            Markdown text ending with a newline, or ``path``.

        Raises
        ------
        TypeError, ValueError
            ``digits`` is not an int, or is outside 0..17; ``path`` as in :meth:`to_json`.
        IsADirectoryError, OSError
            As in :meth:`to_json`.
        """
        dest = None if path is None else _report_path(path, "report.md")
        if not _is_int(digits):
            raise TypeError(f"digits must be an int in 0..17; got {digits!r} ({type(digits).__name__})")
        if not 0 <= digits <= 17:
            raise ValueError(f"digits must be an int in 0..17; got {digits!r}")
        digits = int(digits)
        f = lambda x: _fmt(x, digits)  # noqa: E731
        sev = [f"s{s}" for s in range(1, N_SEVERITIES + 1)]
        lines = [
            f"**{_md_text(self.dataset)}** ({self.task}), N = {self.n_samples}, baseline: {self.baseline}",
            "",
            "| metric | value |",
            "|---|---|",
            f"| clean error | {f(self.clean_error)} |",
            f"| clean balanced accuracy | {f(self.clean_balanced_accuracy)} |",
            f"| mean corrupted error | {f(self.mean_error)} |",
            f"| BE | {f(self.mean_be)} |",
            f"| rBE | {f(self.mean_rbe)} |",
            "",
            "Balanced error per corruption and severity",
            "",
            "| corruption | " + " | ".join(sev) + " | mean | BE | rBE |",
            "|---" * (len(sev) + 4) + "|",
        ]
        for c in self.corruptions:
            cells = [f(e) for e in self.errors[c]] + [f(self.mean_errors[c]), f(self.be[c]), f(self.rbe[c])]
            lines.append(f"| {_md_text(c)} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Balanced accuracy per corruption and severity",
            "",
            "| corruption | " + " | ".join(sev) + " | mean |",
            "|---" * (len(sev) + 2) + "|",
        ]
        for c in self.corruptions:
            ba = self.balanced_accuracies[c]
            cells = [f(a) for a in ba] + [f(1.0 - self.mean_errors[c])]
            lines.append(f"| {_md_text(c)} | " + " | ".join(cells) + " |")
        return _text_or_file("\n".join(lines) + "\n", dest)

    def to_csv(self, path: Union[str, "os.PathLike[str]", None] = None) -> Union[str, Path]:
        """Return a long-format CSV of the per-severity numbers.

        Columns ``corruption,severity,error,balanced_accuracy``; the first row is ``clean`` with severity 0,
        then one row per evaluated corruption and severity 1..5. Floats are written with full precision.

        Parameters
        ----------
        path : str or path-like, optional
            If given, the text is written there (atomically, as :meth:`to_json` writes)
            and the path is returned instead of the text.

        Returns
        -------
        str, or pathlib.Path when ``path`` is given
            CSV text with ``\\n`` line endings and a header row, or ``path``.

        Raises
        ------
        TypeError, IsADirectoryError, OSError
            ``path`` as in :meth:`to_json`.
        """
        dest = None if path is None else _report_path(path, "report.csv")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["corruption", "severity", "error", "balanced_accuracy"])
        w.writerow(["clean", 0, repr(self.clean_error), repr(self.clean_balanced_accuracy)])
        for c in self.corruptions:
            for s, (e, a) in enumerate(zip(self.errors[c], self.balanced_accuracies[c]), start=1):
                w.writerow([c, s, repr(e), repr(a)])
        return _text_or_file(buf.getvalue(), dest)


def _report_path(path, example: str) -> Path:
    """``path`` (str or path-like) as a Path to write a report to, refusing a folder; a
    leading ``~`` is expanded (:func:`~._validation.check_path`)."""
    dest = Path(check_path(path, "path", "file"))
    # Path("a.json/") is Path("a.json"): a name ending in a separator means a folder.
    if dest.is_dir() or os.fspath(path).endswith(("/", os.sep)):
        raise IsADirectoryError(f"path {os.fspath(path)!r} is a folder; give a file name "
                                f"(for example {os.path.join(os.fspath(path), example)!r})")
    return dest


def _text_or_file(text: str, dest):
    """``text``, or ``dest`` after writing ``text`` to it atomically."""
    if dest is None:
        return text
    write_text_atomic(dest, text)
    return dest


def _report_from_fields(values: dict) -> RobustnessReport:
    """Rebuild a :class:`RobustnessReport` from :meth:`RobustnessReport.__reduce__`'s fields (its dicts
    wrapped read-only again)."""
    return RobustnessReport(**{k: MappingProxyType(v) if isinstance(v, dict) else v
                               for k, v in values.items()})


def _resolve_baseline(baseline: Any, dataset: str) -> Tuple[str, float, Mapping[str, float]]:
    if isinstance(baseline, str):
        if baseline != "alexnet":
            raise ValueError(f"baseline must be 'alexnet' or a mapping with keys 'clean_error' and 'errors'; "
                             f"got {baseline!r}")
        if dataset not in ALEXNET_BASELINES:
            raise ValueError(f"dataset must be one of {list(ALEXNET_BASELINES)} for baseline='alexnet' "
                             f"(the reference has AlexNet numbers for those only); got {dataset!r}. "
                             f"Pass baseline={{'clean_error': e, 'errors': {{corruption: e_c}}}} with "
                             f"another model's errors, or use corruption_error / "
                             f"mean_corruption_error, which need no baseline")
        entry = ALEXNET_BASELINES[dataset]
        return "alexnet", float(entry["clean_error"]), entry["errors"]
    if not isinstance(baseline, Mapping):
        raise TypeError(f"baseline must be 'alexnet' or a mapping with keys 'clean_error' and 'errors'; "
                        f"got {type(baseline).__name__}")
    if set(baseline) != {"clean_error", "errors"}:
        raise ValueError(f"baseline mapping must have exactly the keys 'clean_error' and 'errors'; "
                         f"got {sorted(map(str, baseline))}")
    clean = _check_unit_scalar(baseline["clean_error"], "baseline['clean_error']")
    errs = baseline["errors"]
    if not isinstance(errs, Mapping):
        raise TypeError(f"baseline['errors'] must be a non-empty mapping of corruption name to "
                        f"error; got {type(errs).__name__}")
    if not errs:
        raise ValueError("baseline['errors'] must be a non-empty mapping of corruption name to "
                         "error; got an empty mapping")
    checked = {str(c): _check_unit_scalar(v, f"baseline['errors'][{c!r}]") for c, v in errs.items()}
    return "custom", clean, MappingProxyType(checked)


def evaluate_robustness(
    dataset: str,
    y_true: Any,
    clean_scores: Any,
    corrupted_scores: Mapping[str, Any],
    task: Optional[str] = None,
    threshold: Threshold = 0.5,
    baseline: Union[str, Mapping[str, Any]] = "alexnet",
) -> RobustnessReport:
    """MedMNIST-C robustness report: balanced errors per corruption and severity, BE and rBE.

    With ``E_{s,c}`` the balanced error on corruption ``c`` at severity ``s``, ``E_c`` its mean over the five
    severities, ``E_clean`` the clean balanced error and the baseline's ``E_c(B)`` and ``E_clean(B)``:

    - ``BE_c = E_c / E_c(B)``
    - ``rBE_c = (E_c - E_clean) / (E_c(B) - E_clean(B))``
    - ``BE`` and ``rBE`` are the means of ``BE_c`` and ``rBE_c`` over the evaluated corruptions.

    This is the computation of the reference ``Evaluator`` [2]_ (paper [1]_), with its failures fixed: a
    perfect clean model (``E_clean = 0``) is valid, the default threshold works for multi-label datasets,
    1-D labels are accepted, and balanced accuracies are reported along with the errors.

    Parameters
    ----------
    dataset : str
        MedMNIST-C dataset (MedMNIST flag, e.g. ``"pathmnist"``). With a custom ``baseline`` any name is
        accepted, but then ``task`` is required for names that are not MedMNIST-C datasets.
    y_true : array_like, shape (N,), (N, 1) or (N, L), integer
        Labels of the clean test split (not tiled). See :func:`balanced_accuracy`.
    clean_scores : array_like, shape (N,), (N, K) or (N, L), real
        The model's scores on the clean test split.
    corrupted_scores : mapping of str to array_like, shape (5N, ...)
        For each evaluated corruption, the model's scores on its generated file, severity-major (rows
        ``[s*N:(s+1)*N]`` are severity ``s + 1``), with the same number of columns as ``clean_scores``. Any
        non-empty subset of the dataset's corruptions (of the baseline's, for a custom baseline).
    task : str, optional
        MedMNIST task string; defaults to the dataset's (``DATASET_TASKS[dataset]``).
    threshold : float or sequence of float, default 0.5
        Operating point(s), as in :func:`balanced_accuracy`; the same for clean and corrupted scores.
    baseline : "alexnet" or mapping, default "alexnet"
        ``"alexnet"``: the AlexNet numbers of the reference (``_baselines.ALEXNET_BASELINES``). A mapping
        ``{"clean_error": float, "errors": {corruption: float}}`` (errors in ``[0, 1]``, ``errors[c]``
        already averaged over severities) to normalise against another model.

    Returns
    -------
    RobustnessReport
        Per-severity errors and balanced accuracies, ``E_c``, ``BE_c``, ``rBE_c``, BE, rBE and the baseline
        numbers used. Corruptions appear in the dataset's reference order (for a custom ``baseline``, in
        the order of its ``errors`` mapping, which also defines the valid names).

    Raises
    ------
    TypeError
        If ``dataset`` or ``task`` is not a str, ``corrupted_scores`` is not a mapping, ``baseline`` is neither
        a str nor a mapping, ``baseline["errors"]`` is not a mapping, a baseline error is not a real
        number, or an argument has a non-numeric dtype (see :func:`balanced_accuracy`).
    ValueError
        If ``dataset``, ``task``, ``baseline`` or a corruption name is unknown (the message lists the valid
        names); if ``corrupted_scores`` is empty; if a shape is wrong (a corrupted array without exactly
        ``5N`` rows or with a different number of columns than ``clean_scores``; for the dataset's own task,
        a number of score columns that is not the dataset's number of classes, or 1 or 2 for binary tasks);
        for bad labels or thresholds (see :func:`balanced_accuracy`); if a custom baseline mapping has other
        keys than ``clean_error`` and ``errors``, an empty ``errors`` or an error outside ``[0, 1]``.
        Zero-denominator rule: if a baseline
        error ``E_c(B)`` is 0 or ``E_c(B) == E_clean(B)`` for an evaluated corruption, BE_c or rBE_c is
        undefined and ``ValueError`` naming ``baseline`` is raised (never NaN); so it is when a denominator
        is so close to 0 (subnormal) that BE_c or rBE_c would overflow to infinity. This cannot happen with
        the AlexNet table, whose denominators are all non-zero; the model's own errors, including
        ``E_clean = 0``, never appear in a denominator.

    Warns
    -----
    UserWarning
        For binary and multi-label tasks, once per call, if clean or corrupted scores leave ``[0, 1]`` while
        every threshold lies in ``(0, 1)`` (see :func:`balanced_accuracy`).

    References
    ----------
    .. [1] Di Salvo, Doerrich, Ledig, "MedMNIST-C", arXiv:2406.17536, 2024 (BE and rBE).
    .. [2] medmnistc 0.1.0, ``medmnistc/eval.py`` (``Evaluator``) and ``medmnistc/utils/baselines.py``.
    """
    if not isinstance(dataset, str):
        raise TypeError(f"dataset must be a str, one of {list(ALEXNET_BASELINES)}; got {type(dataset).__name__}")
    base_name, base_clean, base_errors = _resolve_baseline(baseline, dataset)
    if task is None:
        if dataset not in DATASET_TASKS:
            raise ValueError(f"task is required for dataset {dataset!r}, which is not one of "
                             f"{list(DATASET_TASKS)}")
        task = DATASET_TASKS[dataset]
    task = _check_task(task)

    y = _check_labels(y_true, task, "y_true")
    n = y.shape[0]
    clean_scores = _as_array(clean_scores, "clean_scores")
    if clean_scores.ndim in (1, 2) and 0 < clean_scores.shape[0] * N_SEVERITIES == n:
        # the labels of a corrupted set (CorruptedSet.arrays()[1]) are the clean ones tiled
        raise ValueError(f"y_true has {n} rows, {N_SEVERITIES} times the {clean_scores.shape[0]} of "
                         f"clean_scores: pass the clean split's labels, not the labels of a corrupted "
                         f"set (tiled once per severity)")
    clean = _check_scores(clean_scores, task, n, "clean_scores")
    _check_label_range(y, clean, task, "y_true", "clean_scores")
    if dataset in DATASET_TASKS and task == DATASET_TASKS[dataset] and task != _BINARY:
        k = DATASET_N_CLASSES[dataset]
        if clean.shape[1] != k:
            raise ValueError(f"clean_scores must have {k} columns for {dataset!r} ({task}); "
                             f"got shape {np.shape(clean_scores)}")
    thr = _check_threshold(threshold, task, y.shape[1] if y.ndim == 2 else 1)

    if not isinstance(corrupted_scores, Mapping):
        raise TypeError(f"corrupted_scores must be a mapping of corruption name to (5N, K) scores; "
                        f"got {type(corrupted_scores).__name__}")
    if len(corrupted_scores) == 0:
        raise ValueError("corrupted_scores must contain at least one corruption")
    valid = list(base_errors) if base_name == "custom" else list(DATASET_CORRUPTIONS[dataset])
    unknown = [c for c in corrupted_scores if c not in base_errors]
    if unknown:
        raise ValueError(f"corrupted_scores has unknown corruption(s) {unknown} for {dataset!r}; "
                         f"valid: {valid}")
    order = tuple(c for c in valid if c in corrupted_scores)

    # Zero-denominator rule (see Raises): checked before any computation.
    for c in order:
        if base_errors[c] == 0.0:
            raise ValueError(f"baseline error for {c!r} is 0, so BE is undefined")
        if base_errors[c] == base_clean:
            raise ValueError(f"baseline error for {c!r} equals the baseline clean error "
                             f"({base_clean!r}), so rBE is undefined")

    clean_shape = np.shape(clean_scores)
    corrupted = {}
    for c in order:
        name = f"corrupted_scores[{c!r}]"
        arr = _as_array(corrupted_scores[c], name)
        shape = arr.shape
        if len(shape) != len(clean_shape) or shape[1:] != clean_shape[1:]:
            raise ValueError(f"{name} must have shape ({N_SEVERITIES * n},) + {tuple(clean_shape[1:])} "
                             f"like clean_scores; got {shape}")
        if shape and shape[0] != N_SEVERITIES * n:
            raise ValueError(f"{name} must have {N_SEVERITIES * n} rows: the {n} images at each of "
                             f"the {N_SEVERITIES} severities, severity-major (severity 1's {n} rows "
                             f"first, as generate writes them; BE and rBE average over all five); "
                             f"got {shape[0]} rows")
        corrupted[c] = _check_scores(arr, task, N_SEVERITIES * n, name)

    _warn_if_not_probabilities({"clean_scores": clean, **{f"corrupted_scores[{c!r}]": corrupted[c] for c in order}},
                               thr, stacklevel=2)
    clean_ba = _ba_kernel(y, clean, task, thr)
    clean_err = 1.0 - clean_ba
    errors, bas, mean_errors, be, rbe = {}, {}, {}, {}, {}
    for c in order:
        s_all = corrupted[c]
        ba_c = tuple(_ba_kernel(y, s_all[i * n:(i + 1) * n], task, thr) for i in range(N_SEVERITIES))
        err_c = tuple(1.0 - a for a in ba_c)
        e_c = float(np.mean(err_c))
        bas[c], errors[c], mean_errors[c] = ba_c, err_c, e_c
        with np.errstate(over="ignore"):
            be[c] = float(np.float64(e_c) / base_errors[c])
            # mean of the per-severity differences: exactly 0 when no severity changes the
            # balanced accuracy (mean(err) - clean_err left ~1e-16 of rounding there)
            drop = np.mean([clean_ba - a for a in ba_c])  # np.float64: / 0 gives inf, caught below
            rbe[c] = float(drop / (base_errors[c] - base_clean))
        if not (np.isfinite(be[c]) and np.isfinite(rbe[c])):
            raise ValueError(f"baseline errors for {c!r} are so close to 0 or to the baseline clean "
                             f"error that BE or rBE overflows")

    if thr is None:
        thr_out: Union[float, Tuple[float, ...], None] = None
    elif isinstance(thr, float):
        thr_out = thr
    else:
        thr_out = tuple(float(t) for t in thr)

    return RobustnessReport(
        dataset=dataset,
        task=task,
        baseline=base_name,
        n_samples=int(n),
        threshold=thr_out,
        corruptions=order,
        clean_error=float(clean_err),
        clean_balanced_accuracy=float(clean_ba),
        errors=MappingProxyType(errors),
        balanced_accuracies=MappingProxyType(bas),
        mean_errors=MappingProxyType(mean_errors),
        be=MappingProxyType(be),
        rbe=MappingProxyType(rbe),
        mean_error=float(np.mean([mean_errors[c] for c in order])),
        mean_be=float(np.mean([be[c] for c in order])),
        mean_rbe=float(np.mean([rbe[c] for c in order])),
        baseline_clean_error=float(base_clean),
        baseline_errors=MappingProxyType({c: float(base_errors[c]) for c in order}),
    )


# --------------------------------------------------------------------------------------------------------
# Pathology metrics: top-1 error, CE, mCE, rCE, CEC
# --------------------------------------------------------------------------------------------------------


def _check_class_scores(
    y_true: Any, scores: Any, n_rows_factor: int, scores_name: str
) -> Tuple[np.ndarray, np.ndarray]:
    y = _check_labels(y_true, "multi-class", "y_true")
    s = _check_scores(scores, "multi-class", n_rows_factor * y.shape[0], scores_name)
    _check_label_range(y, s, "multi-class", "y_true", scores_name)
    return y, s


def top1_error(y_true: Any, scores: Any) -> float:
    """Top-1 error: the fraction of samples whose arg-max class is not the true class.

    Parameters
    ----------
    y_true : array_like, shape (N,) or (N, 1), integer, bool or integral float
        Class indices ``0..K-1``.
    scores : array_like, shape (N, K), real
        Scores, logits or probabilities (only the arg-max matters). Must not contain NaN.

    Returns
    -------
    float
        Error in ``[0, 1]``.

    Raises
    ------
    TypeError
        If an argument is a masked array or has a non-numeric dtype.
    ValueError
        If shapes are wrong or disagree, labels are negative, non-integral or ``>= K``, or ``scores``
        contains NaN.
    """
    y, s = _check_class_scores(y_true, scores, 1, "scores")
    return float(np.mean(np.argmax(s, axis=1) != y))


def top1_errors_by_severity(y_true: Any, corrupted_scores: Any, n_severities: int = N_SEVERITIES) -> np.ndarray:
    """Top-1 error at each severity of one corruption: ``E_{s,c}`` for ``s = 1..n_severities``.

    Parameters
    ----------
    y_true : array_like, shape (N,) or (N, 1), integer, bool or integral float
        Class indices of the clean split (not tiled).
    corrupted_scores : array_like, shape (n_severities * N, K), real
        Scores on the corrupted split, severity-major (rows ``[s*N:(s+1)*N]`` are severity ``s + 1``).
    n_severities : int, default 5
        Number of severity levels (>= 1).

    Returns
    -------
    ndarray, shape (n_severities,), float64
        Errors in ``[0, 1]``; pass them to :func:`corruption_error`.

    Raises
    ------
    TypeError, ValueError
        As :func:`top1_error`, and if ``n_severities`` is not a positive int.
    """
    n_sev = _check_n_severities(n_severities)
    y, s = _check_class_scores(y_true, corrupted_scores, n_sev, "corrupted_scores")
    pred = np.argmax(s, axis=1).reshape(n_sev, y.shape[0])
    return np.mean(pred != y[None, :], axis=1)


def _check_n_severities(n_severities: Any) -> int:
    if isinstance(n_severities, (bool, np.bool_)) or not isinstance(n_severities, (int, np.integer)):
        raise TypeError(f"n_severities must be a positive int; got {type(n_severities).__name__}")
    if n_severities < 1:
        raise ValueError(f"n_severities must be a positive int; got {n_severities}")
    return int(n_severities)


def _check_errors(errors: Any, name: str = "errors") -> np.ndarray:
    e = _as_array(errors, name)
    if e.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real error rates in [0, 1]; got dtype {e.dtype}")
    if e.ndim not in (1, 2) or e.shape[-1] == 0 or e.size == 0:
        raise ValueError(f"{name} must have shape (S,) or (C, S) with S >= 1 severities; got shape {e.shape}")
    e = e.astype(np.float64)
    bad = ~((e >= 0.0) & (e <= 1.0))  # also NaN
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        value = float(e[where])
        hint = " (percentages? divide by 100)" if 1.0 < value <= 100.0 else ""
        raise ValueError(f"{name} must be error rates in [0, 1]; got {value} at index "
                         f"{where if len(where) > 1 else where[0]}{hint}")
    return e


def _reduce_last(e: np.ndarray) -> Union[float, np.ndarray]:
    out = np.mean(e, axis=-1)
    return float(out) if e.ndim == 1 else out


def corruption_error(errors: Any) -> Union[float, np.ndarray]:
    """Corruption error ``CE_c = mean_s E_{s,c}`` (not normalised by a baseline model).

    This is the pathology benchmark's CE [3]_. ImageNet-C's CE [5]_ is instead normalised by a baseline,
    ``sum_s E_{s,c} / sum_s E_{s,c}(AlexNet)``; the pathology suite has no baseline model.

    Parameters
    ----------
    errors : array_like, shape (S,) or (C, S), real in [0, 1]
        Top-1 errors of one corruption at its ``S`` severities (usually 5), or of ``C`` corruptions.

    Returns
    -------
    float or ndarray, shape (C,), float64
        ``CE_c``: a float for 1-D input, one value per row for 2-D input.

    Raises
    ------
    TypeError
        If ``errors`` is not real-valued.
    ValueError
        If ``errors`` has another shape, is empty, or has values outside ``[0, 1]`` or NaN.

    References
    ----------
    .. [3] Zhang et al., "Benchmarking the robustness of deep neural networks to common corruptions in
           digital pathology", MICCAI 2022.
    .. [5] Hendrycks and Dietterich, ICLR 2019.
    """
    return _reduce_last(_check_errors(errors))


def mean_corruption_error(errors: Union[Mapping[str, Any], Any]) -> float:
    """Mean corruption error ``mCE = mean_c CE_c``.

    Parameters
    ----------
    errors : mapping of str to array_like of shape (S,), or array_like, shape (C, S)
        Per-severity top-1 errors in ``[0, 1]`` of each corruption. In a mapping the corruptions may have
        different numbers of severities; each ``CE_c`` is its own mean.

    Returns
    -------
    float
        mCE in ``[0, 1]``.

    Raises
    ------
    TypeError, ValueError
        As :func:`corruption_error`; ``ValueError`` also for an empty mapping or a 1-D array (which would be
        a single corruption: use :func:`corruption_error`).

    References
    ----------
    .. [3] Zhang et al., MICCAI 2022.
    """
    if isinstance(errors, Mapping):
        if not errors:
            raise ValueError("errors must contain at least one corruption")
        ces = []
        for c, v in errors.items():
            e = _check_errors(v, f"errors[{c!r}]")
            if e.ndim != 1:
                raise ValueError(f"errors[{c!r}] must have shape (S,); got shape {e.shape}")
            ces.append(float(np.mean(e)))
        return float(np.mean(ces))
    e = _check_errors(errors)
    if e.ndim != 2:
        raise ValueError(f"errors must be a mapping or have shape (C, S); got shape {e.shape}")
    return float(np.mean(np.mean(e, axis=1)))


def relative_corruption_error(
    errors: Any, clean_error: float, form: str = "difference"
) -> Union[float, np.ndarray]:
    """Relative corruption error rCE_c of one (or several) corruptions, without a baseline model.

    The pathology benchmark's released code does not compute rCE; this is the ImageNet-C "relative" form [5]_
    taken without normalising by a baseline model:

    - ``form="difference"`` (default): ``rCE_c = mean_s (E_{s,c} - E_clean) = CE_c - E_clean``, in
      ``[-1, 1]``; negative if the model does better on corrupted than on clean images;
    - ``form="ratio"``: ``rCE_c = CE_c / E_clean``, in ``[0, inf)``.

    Parameters
    ----------
    errors : array_like, shape (S,) or (C, S), real in [0, 1]
        Per-severity top-1 errors of one corruption, or of ``C`` corruptions.
    clean_error : float in [0, 1]
        ``E_clean``, the top-1 error on the clean images.
    form : {"difference", "ratio"}, default "difference"

    Returns
    -------
    float or ndarray, shape (C,), float64
        A float for 1-D ``errors``, one value per row for 2-D.

    Raises
    ------
    TypeError
        If ``errors`` is not real-valued or ``clean_error`` is not a real number (either a masked array), or
        ``form`` is not a str.
    ValueError
        As :func:`corruption_error`; if ``clean_error`` is outside ``[0, 1]``; if ``form`` is unknown; with
        ``form="ratio"`` and ``clean_error == 0`` (a perfect clean model: the ratio is undefined, use the
        difference form), following the module's zero-denominator rule, or a subnormal ``clean_error`` that
        would overflow the ratio to infinity.

    References
    ----------
    .. [3] Zhang et al., MICCAI 2022.
    .. [5] Hendrycks and Dietterich, ICLR 2019.
    """
    # a str first: an array form was compared element-wise by ``in`` and raised NumPy's
    # "truth value of an array ... is ambiguous", which named no argument
    if not isinstance(form, str):
        raise TypeError(f"form must be a str, one of ['difference', 'ratio']; got {form!r} "
                        f"({type(form).__name__})")
    if form not in ("difference", "ratio"):
        raise ValueError(f"form must be one of ['difference', 'ratio']; got {form!r}")
    e = _check_errors(errors)
    clean = _check_unit_scalar(clean_error, "clean_error")
    if form == "difference":
        return _reduce_last(e - clean)
    if clean == 0.0:
        raise ValueError("clean_error is 0, so the ratio form of rCE is undefined; use form='difference'")
    ce = _reduce_last(e)
    # A subnormal clean_error (about 5.6e-309 or less) can overflow the ratio to inf.
    if np.max(ce) > clean * np.finfo(np.float64).max:
        raise ValueError(f"clean_error {clean!r} is too small for the ratio form of rCE (it overflows); "
                         "use form='difference'")
    return ce / clean


def top1_confidence(clean_probs: Any, corrupted_probs: Any, n_severities: int = N_SEVERITIES) -> np.ndarray:
    """Top-1 confidence of each image, clean and at every severity: the input of CEC.

    ``p[i, 0] = max_k clean_probs[i, k]`` and ``p[i, s] = max_k corrupted_probs[(s-1)*N + i, k]`` (the
    probability of whatever class is predicted).

    Parameters
    ----------
    clean_probs : array_like, shape (N, K), float in [0, 1]
        Softmax probabilities on the clean images (rows sum to 1 within 0.01).
    corrupted_probs : array_like, shape (n_severities * N, K), float in [0, 1]
        Softmax probabilities on one corruption, severity-major (rows ``[s*N:(s+1)*N]`` are severity
        ``s + 1``).
    n_severities : int, default 5

    Returns
    -------
    ndarray, shape (N, n_severities + 1), float64
        New array; column 0 is clean, column ``s`` is severity ``s``.

    Raises
    ------
    TypeError
        If an array is not real-valued or ``n_severities`` is not an int.
    ValueError
        If shapes are wrong or disagree, values are outside ``[0, 1]`` / rows do not sum to 1 (which
        catches logits: CEC compares confidences across images and needs probabilities), or ``n_severities``
        is below 1.
    """
    n_sev = _check_n_severities(n_severities)
    clean = _check_probs(clean_probs, None, "clean_probs")
    n, k = clean.shape
    corr = _check_probs(corrupted_probs, n_sev * n, "corrupted_probs")
    if corr.shape[1] != k:
        raise ValueError(f"corrupted_probs must have {k} columns like clean_probs; got shape {corr.shape}")
    out = np.empty((n, n_sev + 1), dtype=np.float64)
    out[:, 0] = clean.max(axis=1)
    out[:, 1:] = corr.reshape(n_sev, n, k).max(axis=2).T
    return out


def _check_probs(probs: Any, n_rows: Optional[int], name: str) -> np.ndarray:
    p = _as_array(probs, name)
    if p.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real-valued array of probabilities; got dtype {p.dtype}")
    # the corrupted probabilities are stacked severity-major: say so, with the row count
    want = "(N, K) with N, K >= 1" if n_rows is None else (
        f"({n_rows}, K): the severities stacked severity-major, (n_severities * N, K)")
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"{name} must have shape {want}; got shape {p.shape}")
    if n_rows is not None and p.shape[0] != n_rows:
        raise ValueError(f"{name} must have shape {want}; got shape {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):  # also rejects NaN
        raise ValueError(f"{name} must be probabilities in [0, 1] (softmax outputs, not logits)")
    sums = p.sum(axis=1, dtype=np.float64)
    if not np.all(np.abs(sums - 1.0) <= 1e-2):
        raise ValueError(f"{name} rows must sum to 1 (softmax outputs)")
    return p


def corruption_error_of_confidence(p: Any, *, per_image: bool = False) -> Union[float, np.ndarray]:
    """Corruption error of confidence (CEC) of one corruption.

    For image ``i`` with top-1 confidences ``p_i = (p_0, p_1, ..., p_S)`` (clean, then severities 1..S),
    ``CEC_i = #{(a, b) : a < b, p_a <= p_b} / (S (S + 1) / 2)``: the fraction of ordered pairs in which
    confidence does not drop as the corruption gets stronger. Ties count as errors. For ``S = 5`` there are
    15 pairs. ``CEC_c`` is the mean over images; lower is better (0: confidence strictly decreasing with
    severity; 1: never decreasing). Report the mean over corruptions of ``CEC_c``.

    Parameters
    ----------
    p : array_like, shape (N, S + 1), real
        One row per image, columns ordered clean, severity 1, ..., severity S (layout of
        :func:`top1_confidence`; normally ``S = 5``, so ``(N, 6)``). Only the order of values within a row
        matters. Not modified.
    per_image : bool, default False
        If true, return the per-image values ``CEC_i`` instead of their mean.

    Returns
    -------
    float or ndarray, shape (N,), float64
        ``CEC_c`` in ``[0, 1]``, or the per-image values if ``per_image``.

    Raises
    ------
    TypeError
        If ``p`` is not real-valued or ``per_image`` is not a bool.
    ValueError
        If ``p`` is not 2-D with at least one row and two columns, or contains NaN.

    Warns
    -----
    UserWarning
        If ``p`` has more columns than rows and more than 11 columns (over ten severities):
        most likely the transposed ``(S + 1, N)`` layout, one row per severity, which gives a
        meaningless value. The value is still returned.

    References
    ----------
    .. [3] Zhang et al., MICCAI 2022 (CEC). Unlike the released code, the input is not modified.
    """
    if not isinstance(per_image, (bool, np.bool_)):
        raise TypeError(f"per_image must be a bool; got {type(per_image).__name__}")
    arr = _as_array(p, "p")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"p must be a real-valued array; got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ValueError(f"p must have shape (N, S + 1) with N >= 1 images and S >= 1 severities "
                         f"(usually (N, 6)); got shape {arr.shape}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("p contains NaN")
    n, m = arr.shape
    if m > max(n, 11):
        warnings.warn(f"p has shape {arr.shape}: {m} columns (clean + {m - 1} severities) for "
                      f"{n} images; CEC expects one row per image, (N, S + 1). Pass p.T if the "
                      f"rows are the clean image and the severities", UserWarning, stacklevel=2)
    count = np.zeros(n, dtype=np.int64)
    # One pass per column a against all later columns, vectorised over images and b: m - 1
    # Python iterations, not the m (m - 1) / 2 pairs (a (6, 32768) array, the severities stacked
    # as rows by mistake, took about 15 minutes pair by pair).
    for a in range(m - 1):
        count += np.count_nonzero(arr[:, a, None] <= arr[:, a + 1:], axis=1)
    values = count / (m * (m - 1) // 2)
    return values if per_image else float(np.mean(values))
