"""Tests of medmnistc_fast.evaluate: balanced accuracy, the MedMNIST-C report (BE/rBE) and the pathology
metrics (CE, mCE, rCE, CEC).

Expected values are worked out by hand in the comments; they do not come from the code under test.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import json
import os
import re
import signal
import stat
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medmnistc_fast import evaluate as ev
from medmnistc_fast._baselines import (
    ALEXNET_BASELINES,
    DATASET_CORRUPTIONS,
    DATASET_N_CLASSES,
    DATASET_TASKS,
    TASKS,
)

BINARY, MULTI, ORDINAL = "binary-class", "multi-class", "ordinal-regression"
MULTILABEL = "multi-label, binary-class"


def onehot(pred, k):
    return np.eye(k)[np.asarray(pred)]


def frozen_copy(a):
    """A read-only copy, so that any write by the code under test raises."""
    b = np.array(a, copy=True)
    b.setflags(write=False)
    return b


# Naive oracle (scikit-learn's definition written with loops), for property tests only.
def naive_balanced_accuracy(y, pred):
    recalls = []
    for c in sorted(set(int(v) for v in y)):
        idx = [i for i in range(len(y)) if y[i] == c]
        recalls.append(sum(1 for i in idx if pred[i] == c) / len(idx))
    return sum(recalls) / len(recalls)


# --------------------------------------------------------------------------------------------------------
# balanced_accuracy: hand-computed cases
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", [MULTI, ORDINAL])
def test_multiclass_hand_case(task):
    # y    = 0 0 | 1 1 | 2 2 2
    # pred = 0 0 | 1 0 | 2 2 1
    # recall_0 = 2/2 = 1, recall_1 = 1/2, recall_2 = 2/3 -> BA = (6/6 + 3/6 + 4/6) / 3 = 13/18
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    scores = onehot([0, 0, 1, 0, 2, 2, 1], 3)
    assert ev.balanced_accuracy(y, scores, task) == pytest.approx(13 / 18, abs=1e-15)
    assert ev.balanced_error(y, scores, task) == pytest.approx(5 / 18, abs=1e-15)
    # threshold is ignored for argmax tasks
    assert ev.balanced_accuracy(y, scores, task, threshold=0.9) == ev.balanced_accuracy(y, scores, task)


def test_multiclass_argmax_of_soft_scores():
    # argmax rows: [0.5,0.3,0.2] -> 0, [0.1,0.2,0.7] -> 2, [0.2,0.5,0.3] -> 1, [0.6,0.3,0.1] -> 0
    # y = 0 2 1 1: recall_0 = 1/1, recall_1 = 1/2, recall_2 = 1/1 -> BA = 5/6
    s = np.array([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7], [0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    assert ev.balanced_accuracy([0, 2, 1, 1], s, MULTI) == pytest.approx(5 / 6, abs=1e-15)


def test_multiclass_predicted_class_absent_from_truth_is_ignored():
    # y = 0 0 1 1, pred = 0 2 1 1 with K = 3: class 2 is not in y_true and does not enter the mean.
    # recall_0 = 1/2, recall_1 = 2/2 -> BA = 3/4
    assert ev.balanced_accuracy([0, 0, 1, 1], onehot([0, 2, 1, 1], 3), MULTI) == pytest.approx(0.75, abs=1e-15)


def test_binary_hand_case_and_score_layouts():
    # y = 0 0 0 1 1 ; positive score p = .1 .6 .4 .7 .5 ; threshold .5 (strict >): pred = 0 1 0 1 0
    # TNR = 2/3, TPR = 1/2 -> BA = (2/3 + 1/2) / 2 = 7/12
    y = np.array([0, 0, 0, 1, 1])
    p = np.array([0.1, 0.6, 0.4, 0.7, 0.5])
    expected = 7 / 12
    assert ev.balanced_accuracy(y, p, BINARY) == pytest.approx(expected, abs=1e-15)  # 1-D scores
    assert ev.balanced_accuracy(y, p[:, None], BINARY) == pytest.approx(expected, abs=1e-15)  # (N, 1)
    two = np.stack([1 - p, p], axis=1)  # (N, 2): last column is the positive class
    assert ev.balanced_accuracy(y, two, BINARY) == pytest.approx(expected, abs=1e-15)
    assert ev.balanced_accuracy(y[:, None], two, BINARY) == pytest.approx(expected, abs=1e-15)  # (N, 1) labels
    # threshold .45: pred = 0 1 0 1 1 -> TNR = 2/3, TPR = 1 -> BA = 5/6
    assert ev.balanced_accuracy(y, two, BINARY, threshold=0.45) == pytest.approx(5 / 6, abs=1e-15)
    assert ev.balanced_error(y, two, BINARY, threshold=0.45) == pytest.approx(1 / 6, abs=1e-15)


def test_binary_single_class_present():
    # only positives: BA = TPR = 2/3 (the absent negative class is ignored)
    assert ev.balanced_accuracy([1, 1, 1], [0.9, 0.1, 0.8], BINARY) == pytest.approx(2 / 3, abs=1e-15)


def test_multilabel_per_label_thresholds():
    # label 0: y = 1 0 1 0, s = .6 .4 .2 .7
    # label 1: y = 0 0 1 1, s = .3 .1 .25 .9
    y = np.array([[1, 0], [0, 0], [1, 1], [0, 1]])
    s = np.array([[0.6, 0.3], [0.4, 0.1], [0.2, 0.25], [0.7, 0.9]])
    # default 0.5 for both: label 0 pred = 1 0 0 1 -> TPR 1/2, TNR 1/2 -> 1/2
    #                       label 1 pred = 0 0 0 1 -> TPR 1/2, TNR 2/2 -> 3/4 ; mean = 5/8
    assert ev.balanced_accuracy(y, s, MULTILABEL) == pytest.approx(5 / 8, abs=1e-15)
    assert ev.balanced_accuracy(y, s, MULTILABEL, threshold=[0.5, 0.5]) == pytest.approx(5 / 8, abs=1e-15)
    # thresholds (.5, .28): label 1 pred = 1 0 0 1 -> TPR 1/2, TNR 1/2 -> 1/2 ; mean = (1/2 + 1/2) / 2 = 1/2
    assert ev.balanced_accuracy(y, s, MULTILABEL, threshold=[0.5, 0.28]) == pytest.approx(0.5, abs=1e-15)
    assert ev.balanced_accuracy(y, s, MULTILABEL, threshold=np.array([0.5, 0.28])) == pytest.approx(0.5)
    # thresholds (.1, .95): label 0 pred = 1 1 1 1 -> TPR 1, TNR 0 -> 1/2
    #                       label 1 pred = 0 0 0 0 -> TPR 0, TNR 1 -> 1/2 ; mean = 1/2
    assert ev.balanced_error(y, s, MULTILABEL, threshold=(0.1, 0.95)) == pytest.approx(0.5, abs=1e-15)


def test_logits_with_probability_threshold_warn():
    import warnings
    y = [0, 1, 1, 0]
    logits = np.array([-2.0, 0.3, 1.5, -0.1])  # sigmoid: .12 .57 .82 .48 -> all correct at 0.5
    # compared with 0.5 directly: 0.3 counts as negative -> TPR 1/2, TNR 1 -> BA 3/4 (the silent shift)
    with pytest.warns(UserWarning, match=r"y_score has values outside \[0, 1\] \(min -2, max 1.5\).*sigmoid"):
        assert ev.balanced_accuracy(y, logits, BINARY) == pytest.approx(0.75, abs=1e-15)
    with pytest.warns(UserWarning, match=r"threshold is a probability \(0.2, 0.5\)|\[0.2, 0.5\]"):
        ev.balanced_accuracy([[0, 1]], [[0.1, 3.0]], MULTILABEL, threshold=[0.2, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # a threshold outside (0, 1) is a choice for unbounded scores; probabilities stay silent too
        assert ev.balanced_accuracy(y, logits, BINARY, threshold=0) == pytest.approx(1.0, abs=1e-15)
        assert ev.balanced_accuracy(y, [0.0, 1.0, 1.0, 0.0], BINARY) == 1.0
        assert ev.balanced_accuracy(y, np.array([[5.0, -5.0]] * 4), "multi-class") == 0.5  # argmax: no threshold
        ev.balanced_accuracy([[0, 1]], [[0.1, 3.0]], MULTILABEL, threshold=[0.2, 1.5])


@pytest.mark.parametrize("call, arg", [
    (lambda a: ev.balanced_accuracy(a, [[0.9, 0.1], [0.2, 0.8]], "multi-class"), "y_true"),
    (lambda a: ev.balanced_accuracy([0, 1], a, "multi-class"), "y_score"),
    (lambda a: ev.top1_error([0, 1], a), "scores"),
    (lambda a: ev.corruption_error(a), "errors"),
])
def test_masked_arrays_are_refused(call, arg):
    # np.asarray drops the mask: the masked row would be counted (here the wrong one of two)
    a = {"y_true": np.ma.array([0, 0], mask=[False, True]),
         "y_score": np.ma.array([[0.9, 0.1], [0.9, 0.1]], mask=[[0, 0], [1, 1]]),
         "scores": np.ma.array([[0.9, 0.1], [0.9, 0.1]], mask=[[0, 0], [1, 1]]),
         "errors": np.ma.array([0.1, 0.2, 0.3, 0.4, 0.9], mask=[0, 0, 0, 0, 1])}[arg]
    before = a.copy()
    with pytest.raises(TypeError, match=rf"^{arg} must be a plain numpy.ndarray, not a masked array: "
                                        r"the metrics would count its masked entries; .*drop the masked rows"):
        call(a)
    assert np.array_equal(a.data, before.data) and np.array_equal(a.mask, before.mask)


@pytest.mark.parametrize("call, arg", [
    (lambda a: ev.balanced_accuracy([0, 1], a, "multi-class"), "y_score"),
    (lambda a: ev.top1_error([0, 1], a), "scores"),
    (lambda a: ev.balanced_accuracy([[0, 1], [1, 0]], [[0.2, 0.9], [0.8, 0.1]], "multi-label, binary-class",
                                    threshold=a), "threshold"),
])
def test_lists_holding_masked_arrays_are_refused(call, arg):
    # np.asarray([masked row, row]) keeps the masked row's data and drops its mask, so the
    # refusal of a masked array was sidestepped by wrapping it in a list
    row = np.ma.array([0.9, 0.1], mask=[1, 1])
    a = {"y_score": [row, [0.2, 0.8]], "scores": (row, (0.2, 0.8)),
         "threshold": [np.ma.masked, 0.5]}[arg]
    with pytest.raises(TypeError, match=rf"^{arg} must not hold masked arrays: the metrics would count"):
        call(a)
    assert row.mask.all() and row.data.tolist() == [0.9, 0.1]


def test_other_sequences_holding_masked_arrays_are_refused():
    # np.asarray reads any sequence (a deque here) like a list and drops the masks inside it;
    # the same for the per-corruption scores of evaluate_robustness
    row = np.ma.array([0.9, 0.1], mask=[1, 1])
    with pytest.raises(TypeError, match=r"^scores must not hold masked arrays"):
        ev.top1_error([0, 1], collections.deque([row, [0.2, 0.8]]))
    y, clean = [0, 1], [[0.9, 0.1], [0.2, 0.8]]
    scores = {"defocus_blur": collections.deque([row, [0.2, 0.8]] * 5)}
    with pytest.raises(TypeError, match=r"^corrupted_scores\['defocus_blur'\] must not hold masked"):
        ev.evaluate_robustness("retinamnist", y, clean, scores, task="multi-class")
    assert row.mask.all() and row.data.tolist() == [0.9, 0.1]


def test_deeply_nested_or_self_holding_lists_give_the_named_error():
    # NumPy stops at 64 dimensions; the masked-array search must not recurse past Python's
    # limit (RecursionError) nor follow a list that holds itself forever
    deep = [0.5]
    for _ in range(3000):
        deep = [deep]
    loop = [0.5]
    loop.append(loop)
    for errors in (deep, loop):
        with pytest.raises(ValueError, match=r"^errors cannot be read as a rectangular array"):
            ev.corruption_error(errors)


def test_logits_warning_names_the_users_line():
    # balanced_error calls balanced_accuracy: its warning pointed at that line of evaluate.py
    y, logits = [0, 1, 1, 0], np.array([-2.0, 0.3, 1.5, -0.1])
    for fn in (ev.balanced_accuracy, ev.balanced_error):
        with pytest.warns(UserWarning, match="outside") as rec:
            fn(y, logits, BINARY)
        assert [w.filename for w in rec] == [__file__], fn.__name__


def test_logits_warning_shows_a_bound_that_rounds_into_the_unit_interval():
    # 1 + 2**-52 with 4 significant digits reads "1", which does not say what is outside [0, 1]
    with pytest.warns(UserWarning, match=r"\(min 0, max 1\.0000000000000002\)"):
        ev.balanced_accuracy([0, 1], [0.0, 1.0 + 2.0**-52], BINARY)
    with pytest.warns(UserWarning, match=r"\(min -1e-300, max 0\.9\)"):
        ev.balanced_accuracy([0, 1], [-1e-300, 0.9], BINARY)


@pytest.mark.parametrize("value", [np.ma.masked, np.ma.array(0.5, mask=True), np.ma.array(0.5)])
def test_masked_scalars_are_refused(value):
    # float() read a masked 0-d array as NaN (with a warning) and the error said "got nan"; an
    # unmasked one passed with its mask dropped like the masked arrays the module refuses
    y, s = [0, 1, 1, 0], [0.1, 0.9, 0.8, 0.2]
    with pytest.raises(TypeError, match=r"^threshold must be a real number or a sequence of real numbers, "
                                        r"not a masked array"):
        ev.balanced_accuracy(y, s, BINARY, threshold=value)
    with pytest.raises(TypeError, match=r"^threshold must be .*not a masked array"):
        ev.evaluate_robustness("breastmnist", y, s, {"pixelate": np.tile(s, 5)}, threshold=value)
    with pytest.raises(TypeError, match=r"^clean_error must be a real number in \[0, 1\], not a masked array"):
        ev.relative_corruption_error([0.1, 0.2], value)
    for baseline in ({"clean_error": value, "errors": {"pixelate": 0.3}},
                     {"clean_error": 0.1, "errors": {"pixelate": value}}):
        with pytest.raises(TypeError, match=r"^baseline\['(clean_error|errors)'\].* must be a real number in "
                                            r"\[0, 1\], not a masked array"):
            ev.evaluate_robustness("breastmnist", y, s, {"pixelate": np.tile(s, 5)}, baseline=baseline)


def test_report_warns_once_for_logits_in_any_score_array():
    clean = np.array([0.1, 0.9, 0.8, 0.2])
    bad = np.concatenate([clean] * 4 + [np.array([0.1, 4.0, 0.8, 0.2])])
    with pytest.warns(UserWarning, match=r"corrupted_scores\['pixelate'\] has values outside") as rec:
        ev.evaluate_robustness("breastmnist", [0, 1, 1, 0], clean, {"pixelate": bad, "speckle_noise": bad})
    assert len([w for w in rec if "outside [0, 1]" in str(w.message)]) == 1


def test_multilabel_score_equal_to_threshold_is_negative():
    # Strict ">" as for binary (spec: "score > threshold"), per label. Scores exactly on the threshold:
    # label 0: y = 1 0, s = .5 .5, thr .5 -> pred = 0 0 -> TPR 0, TNR 1 -> 1/2
    # label 1: y = 0 1, s = .25 .75, thr .25 -> pred = 0 1 -> TNR 1, TPR 1 -> 1 ; mean = 3/4
    # (with ">=" label 0 would predict 1 1 -> 1/2 and label 1 1 1 -> 1/2: mean 1/2)
    y = np.array([[1, 0], [0, 1]])
    s = np.array([[0.5, 0.25], [0.5, 0.75]])
    assert ev.balanced_accuracy(y, s, MULTILABEL, threshold=[0.5, 0.25]) == pytest.approx(3 / 4, abs=1e-15)
    # scalar threshold on a score equal to it, multi-label: y = 1 0, s = .5 .5 -> pred 0 0 -> 1/2
    assert ev.balanced_accuracy(y[:, :1], s[:, :1], MULTILABEL, threshold=0.5) == pytest.approx(0.5, abs=1e-15)
    # single label scored 1.0 on a positive and exactly .5 on a negative: perfect at .5
    assert ev.balanced_accuracy([[1], [0]], [[1.0], [0.5]], MULTILABEL) == 1.0


def test_multilabel_label_with_one_class_only():
    # label 0 all negative: y = 0 0 0, pred (>.5) = 0 1 0 -> TNR = 2/3 (TPR absent)
    # label 1: y = 1 0 1, pred = 1 0 0 -> TPR 1/2, TNR 1 -> 3/4 ; mean = (2/3 + 3/4) / 2 = 17/24
    y = np.array([[0, 1], [0, 0], [0, 1]])
    s = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.4]])
    assert ev.balanced_accuracy(y, s, MULTILABEL) == pytest.approx(17 / 24, abs=1e-15)


@pytest.mark.parametrize("task", TASKS)
def test_perfect_model_has_balanced_accuracy_one(task):
    if task == MULTILABEL:
        y = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]])
        s = np.where(y == 1, 0.9, 0.1)
    elif task == BINARY:
        y = np.array([0, 1, 1, 0, 1])
        s = np.where(y == 1, 0.8, 0.3)
    else:
        y = np.array([2, 0, 1, 3, 3, 0])
        s = onehot(y, 4) * 0.7 + 0.05
    assert ev.balanced_accuracy(y, s, task) == 1.0
    assert ev.balanced_error(y, s, task) == 0.0


def test_label_layouts_and_dtypes_agree():
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    s = onehot([0, 0, 1, 0, 2, 2, 1], 3)
    ref = ev.balanced_accuracy(y, s, MULTI)
    assert ev.balanced_accuracy(y[:, None], s, MULTI) == ref
    assert ev.balanced_accuracy(y.astype(np.uint8)[:, None], s, MULTI) == ref  # MedMNIST label dtype
    assert ev.balanced_accuracy(y.astype(np.float32), s, MULTI) == ref  # integral floats accepted
    assert ev.balanced_accuracy(y.tolist(), s.tolist(), MULTI) == ref
    assert ev.balanced_accuracy(y, s.astype(np.float32), MULTI) == ref
    # multi-label with a single label column: 1-D labels and scores mean L = 1
    yb = np.array([0, 1, 1, 0])
    sb = np.array([0.2, 0.7, 0.4, 0.6])
    # pred = 0 1 0 1 -> TPR 1/2, TNR 1/2 -> 1/2
    assert ev.balanced_accuracy(yb, sb, MULTILABEL) == pytest.approx(0.5)
    assert ev.balanced_accuracy(yb[:, None], sb[:, None], MULTILABEL) == pytest.approx(0.5)
    assert ev.balanced_accuracy(yb.astype(bool), sb, BINARY) == pytest.approx(0.5)


@pytest.mark.parametrize("task", TASKS)
def test_balanced_accuracy_does_not_modify_inputs(task):
    rng = np.random.default_rng(1)
    if task == MULTILABEL:
        y = rng.integers(0, 2, (20, 3))
        s = rng.random((20, 3))
        thr = np.array([0.3, 0.5, 0.7])
    else:
        y = rng.integers(0, 2 if task == BINARY else 4, (20, 1))
        s = rng.random((20, 2 if task == BINARY else 4))
        thr = 0.4
    y0, s0, t0 = y.copy(), s.copy(), np.copy(thr)
    yr, sr = frozen_copy(y), frozen_copy(s)
    tr = frozen_copy(thr) if isinstance(thr, np.ndarray) else thr
    a = ev.balanced_accuracy(yr, sr, task, tr)  # read-only inputs work
    b = ev.balanced_accuracy(y, s, task, thr)
    assert a == b
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(s, s0)
    np.testing.assert_array_equal(thr, t0)


def test_non_contiguous_inputs():
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    s = onehot([0, 0, 1, 0, 2, 2, 1], 3)
    s_f = np.asfortranarray(s)
    s_strided = np.repeat(s, 2, axis=0)[::2]
    assert ev.balanced_accuracy(y, s_f, MULTI) == pytest.approx(13 / 18)
    assert ev.balanced_accuracy(y, s_strided, MULTI) == pytest.approx(13 / 18)


# --------------------------------------------------------------------------------------------------------
# balanced_accuracy: bad input
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(task="multiclass"), ValueError, "task"),
        (dict(task="MULTI-CLASS"), ValueError, "task"),
        (dict(task=3), TypeError, "task"),
        (dict(y_true=np.zeros((4, 1, 1), int)), ValueError, "y_true"),
        (dict(y_true=np.zeros((0,), int), y_score=np.zeros((0, 3))), ValueError, "y_true"),
        (dict(y_true=np.array([0, 1, 2])), ValueError, "y_score"),  # 3 labels, 4 score rows
        (dict(y_true=np.array([0, 1, 3, 1])), ValueError, "y_true"),  # label 3 with K = 3
        (dict(y_true=np.array([0, -1, 2, 1])), ValueError, "y_true"),
        (dict(y_true=np.array([0.0, 1.5, 2.0, 1.0])), ValueError, "y_true"),
        # beyond int64: the cast used to warn (float) or wrap to -1 in the message (uint64)
        (dict(y_true=np.array([1e20, 0.0, 1.0, 2.0])), ValueError, "y_true.*int64 range"),
        (dict(y_true=np.array([2**64 - 1, 0, 1, 2], np.uint64)), ValueError,
         "y_true.*18446744073709551615"),
        (dict(y_true=np.array(["a", "b", "c", "d"])), TypeError, "y_true"),
        (dict(y_true=np.zeros((4, 2), int)), ValueError, "y_true"),  # two label columns, not multi-label
        (dict(y_score=np.zeros(4)), ValueError, "y_score"),  # multi-class needs (N, K)
        (dict(y_score=np.full((4, 3), np.nan)), ValueError, "y_score"),
        (dict(y_score=np.array([["a"] * 3] * 4)), TypeError, "y_score"),
        (dict(y_score=np.zeros((4, 3, 1))), ValueError, "y_score"),
    ],
)
def test_balanced_accuracy_bad_input_multiclass(kwargs, exc, match):
    args = dict(y_true=np.array([0, 1, 2, 1]), y_score=np.eye(3)[[0, 1, 2, 1]], task=MULTI)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        ev.balanced_accuracy(**args)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(y_score=np.zeros((4, 3))), ValueError, "y_score"),  # binary accepts 1 or 2 columns
        (dict(y_true=np.array([0, 1, 2, 1])), ValueError, "y_true"),  # binary labels must be 0/1
        (dict(threshold=[0.5]), TypeError, "threshold"),
        (dict(threshold=True), TypeError, "threshold"),
        (dict(threshold="0.5"), TypeError, "threshold"),
        (dict(threshold=float("nan")), ValueError, "threshold"),
        # +-inf used to be accepted, and then RobustnessReport.to_json could not write the report
        (dict(threshold=float("inf")), ValueError, "threshold.*finite"),
        (dict(threshold=-np.inf), ValueError, "threshold.*finite"),
        # a ragged list used to fail with NumPy's message, which names no argument
        (dict(y_score=[[0.9, 0.1], [0.2, 0.8], [0.3], [0.6, 0.4]]), ValueError, "y_score.*rectangular"),
        (dict(y_true=[[0], [1], [1, 0], [0]]), ValueError, "y_true.*rectangular"),
    ],
)
def test_balanced_accuracy_bad_input_binary(kwargs, exc, match):
    args = dict(y_true=np.array([0, 1, 1, 0]), y_score=np.array([0.1, 0.9, 0.8, 0.3]), task=BINARY)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        ev.balanced_accuracy(**args)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(threshold=[0.5, 0.5, 0.5]), ValueError, "threshold"),  # 2 labels
        (dict(threshold=[0.5, float("nan")]), ValueError, "threshold"),
        (dict(threshold=[0.5, float("inf")]), ValueError, "threshold.*finite"),
        (dict(threshold=np.inf), ValueError, "threshold.*finite"),
        (dict(threshold=[[0.5, 0.5]]), TypeError, "threshold"),
        (dict(threshold="ab"), TypeError, "threshold"),
        (dict(y_score=np.zeros((3, 3))), ValueError, "y_score"),  # 3 score columns for 2 labels
        (dict(y_true=np.array([[0, 2], [1, 0], [1, 1]])), ValueError, "y_true"),  # not 0/1
    ],
)
def test_balanced_accuracy_bad_input_multilabel(kwargs, exc, match):
    args = dict(y_true=np.array([[0, 1], [1, 0], [1, 1]]), y_score=np.full((3, 2), 0.6), task=MULTILABEL)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        ev.balanced_accuracy(**args)


# --------------------------------------------------------------------------------------------------------
# balanced_accuracy: properties
# --------------------------------------------------------------------------------------------------------

_labels = st.integers(1, 40).flatmap(
    lambda n: st.tuples(st.integers(1, 6), st.integers(0, 2**32 - 1)).map(lambda t: (n,) + t)
)


@settings(deadline=None, max_examples=150)
@given(_labels, st.sampled_from([MULTI, ORDINAL, BINARY, MULTILABEL]), st.randoms(use_true_random=False))
def test_property_perfect_is_one_and_permutation_invariant(params, task, rnd):
    n, k, seed = params
    rng = np.random.default_rng(seed)
    if task == MULTILABEL:
        y = rng.integers(0, 2, (n, k))
        perfect = np.where(y == 1, 0.75, 0.25)
        noisy = rng.random((n, k))
        thr = rng.random(k)
    elif task == BINARY:
        y = rng.integers(0, 2, n)
        perfect = np.where(y == 1, 0.75, 0.25)
        noisy = rng.random((n, 2))
        thr = 0.5
    else:
        k = k + 1
        y = rng.integers(0, k, n)
        perfect = onehot(y, k) + 0.1
        noisy = rng.random((n, k))
        thr = 0.5
    assert ev.balanced_accuracy(y, perfect, task) == 1.0  # default threshold 0.5 separates .25 / .75
    perm = list(range(n))
    rnd.shuffle(perm)
    perm = np.array(perm)
    a = ev.balanced_accuracy(y, noisy, task, thr)
    b = ev.balanced_accuracy(y[perm], noisy[perm], task, thr)
    assert a == pytest.approx(b, abs=1e-12)
    assert 0.0 <= a <= 1.0


@settings(deadline=None, max_examples=150)
@given(st.integers(1, 30), st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_property_matches_naive_definition(n, k, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    s = rng.random((n, k))
    expected = naive_balanced_accuracy(y.tolist(), np.argmax(s, axis=1).tolist())
    assert ev.balanced_accuracy(y, s, MULTI) == pytest.approx(expected, abs=1e-12)
    # multi-label: mean over labels of the binary definition
    yl = rng.integers(0, 2, (n, k))
    sl = rng.random((n, k))
    thr = rng.random(k)
    per_label = [naive_balanced_accuracy(yl[:, j].tolist(), (sl[:, j] > thr[j]).astype(int).tolist())
                 for j in range(k)]
    assert ev.balanced_accuracy(yl, sl, MULTILABEL, thr) == pytest.approx(sum(per_label) / k, abs=1e-12)


# --------------------------------------------------------------------------------------------------------
# Baseline data
# --------------------------------------------------------------------------------------------------------


def test_baseline_table_shape_and_spot_values():
    assert len(ALEXNET_BASELINES) == 12
    assert set(ALEXNET_BASELINES) == set(DATASET_TASKS) == set(DATASET_N_CLASSES) == set(DATASET_CORRUPTIONS)
    # values as printed in medmnistc 0.1.0 utils/baselines.py
    assert ALEXNET_BASELINES["breastmnist"]["clean_error"] == 0.14536340852130336
    assert ALEXNET_BASELINES["octmnist"]["errors"]["motion_blur"] == 0.4892
    assert ALEXNET_BASELINES["pathmnist"]["errors"]["bubble"] == 0.10818301335634566
    assert ALEXNET_BASELINES["tissuemnist"]["errors"]["impulse_noise"] == 0.7970869222746931
    assert DATASET_CORRUPTIONS["octmnist"] == (
        "pixelate", "jpeg_compression", "speckle_noise", "defocus_blur", "motion_blur", "contrast_down")
    assert len(DATASET_CORRUPTIONS["dermamnist"]) == 15
    # The baseline's corruptions are the registry's, in the same (reference) order.
    for name, entry in ALEXNET_BASELINES.items():
        assert tuple(entry["errors"]) == DATASET_CORRUPTIONS[name]
    assert DATASET_TASKS["chestmnist"] == MULTILABEL
    assert DATASET_TASKS["retinamnist"] == ORDINAL
    assert {DATASET_TASKS[d] for d in ("breastmnist", "pneumoniamnist")} == {BINARY}
    # every BE and rBE denominator of the shipped table is non-zero (the zero-denominator rule never fires)
    for entry in ALEXNET_BASELINES.values():
        for err in entry["errors"].values():
            assert 0.0 < err < 1.0
            assert err != entry["clean_error"]
    with pytest.raises(TypeError, match="does not support item assignment"):
        ALEXNET_BASELINES["pathmnist"]["errors"]["pixelate"] = 0.0  # read-only


# --------------------------------------------------------------------------------------------------------
# evaluate_robustness
# --------------------------------------------------------------------------------------------------------

# breastmnist (binary), N = 4, y = 0 0 1 1. With one-hot-like scores:
#   all correct               -> BA 1,   error 0
#   one negative flipped      -> TNR 1/2, TPR 1  -> BA 3/4, error 1/4
#   one of each class flipped -> TNR 1/2, TPR 1/2 -> BA 1/2, error 1/2
Y4 = np.array([0, 0, 1, 1])
P_OK = np.array([0.1, 0.2, 0.9, 0.8])  # positive-class scores, threshold .5
P_NEG = np.array([0.9, 0.2, 0.9, 0.8])  # first negative predicted positive
P_BOTH = np.array([0.9, 0.2, 0.1, 0.8])  # one negative and one positive wrong
# AlexNet breastmnist numbers (medmnistc 0.1.0 utils/baselines.py), written out independently:
ALEX_BREAST_CLEAN = 0.14536340852130336
ALEX_BREAST_PIXELATE = 0.46127819548872184
ALEX_BREAST_MOTION = 0.25902255639097743


def two_col(p):
    return np.stack([1 - p, p], axis=1)


def breast_scores():
    # pixelate severities 1..5: errors 0, 1/4, 1/4, 1/2, 1/2 -> E_pixelate = 1.5 / 5 = 0.3
    pix = np.concatenate([P_OK, P_NEG, P_NEG, P_BOTH, P_BOTH])
    # motion_blur: error 1/4 at every severity -> E_motion = 0.25
    mot = np.concatenate([P_NEG] * 5)
    return {"motion_blur": two_col(mot), "pixelate": two_col(pix)}  # deliberately not in reference order


def test_report_perfect_clean_model():
    rep = ev.evaluate_robustness("breastmnist", Y4[:, None], two_col(P_OK), breast_scores())
    assert rep.dataset == "breastmnist" and rep.task == BINARY and rep.baseline == "alexnet"
    assert rep.n_samples == 4 and rep.threshold == 0.5
    assert rep.corruptions == ("pixelate", "motion_blur")  # reference order, not dict order
    assert rep.clean_error == 0.0 and rep.clean_balanced_accuracy == 1.0
    assert rep.errors["pixelate"] == pytest.approx((0, 0.25, 0.25, 0.5, 0.5), abs=1e-15)
    assert rep.balanced_accuracies["pixelate"] == pytest.approx((1, 0.75, 0.75, 0.5, 0.5), abs=1e-15)
    assert rep.errors["motion_blur"] == pytest.approx((0.25,) * 5, abs=1e-15)
    assert rep.mean_errors["pixelate"] == pytest.approx(0.3, abs=1e-15)
    assert rep.mean_errors["motion_blur"] == pytest.approx(0.25, abs=1e-15)
    # BE_c = E_c / E_c(AlexNet)
    be_pix = 0.3 / 0.46127819548872184  # = 0.650366...
    be_mot = 0.25 / 0.25902255639097743  # = 0.965166...
    assert rep.be["pixelate"] == pytest.approx(be_pix, rel=1e-12)
    assert rep.be["motion_blur"] == pytest.approx(be_mot, rel=1e-12)
    assert rep.be["pixelate"] == pytest.approx(0.650366748166, abs=1e-12)
    # rBE_c = (E_c - 0) / (E_c(AlexNet) - E_clean(AlexNet)); well-defined although E_clean = 0
    rbe_pix = 0.3 / (0.46127819548872184 - 0.14536340852130336)  # 0.3 / 0.31591478696741848
    rbe_mot = 0.25 / (0.25902255639097743 - 0.14536340852130336)  # 0.25 / 0.11365914786967407
    assert rep.rbe["pixelate"] == pytest.approx(rbe_pix, rel=1e-12)
    assert rep.rbe["motion_blur"] == pytest.approx(rbe_mot, rel=1e-12)
    assert rep.rbe["pixelate"] == pytest.approx(0.949623165411, abs=1e-12)
    assert rep.mean_be == pytest.approx((be_pix + be_mot) / 2, rel=1e-12)
    assert rep.mean_rbe == pytest.approx((rbe_pix + rbe_mot) / 2, rel=1e-12)
    assert rep.mean_error == pytest.approx(0.275, abs=1e-15)
    assert rep.baseline_clean_error == ALEX_BREAST_CLEAN
    assert dict(rep.baseline_errors) == {"pixelate": ALEX_BREAST_PIXELATE, "motion_blur": ALEX_BREAST_MOTION}


def test_report_nonzero_clean_error_and_1d_inputs():
    # clean: first negative flipped -> E_clean = 1/4; 1-D labels and 1-D positive scores
    cs = {k: v[:, 1] for k, v in breast_scores().items()}
    rep = ev.evaluate_robustness("breastmnist", Y4, P_NEG, cs)
    assert rep.clean_error == pytest.approx(0.25, abs=1e-15)
    # rBE_pixelate = (0.3 - 0.25) / (0.46127819548872184 - 0.14536340852130336) = 0.05 / 0.3159147869674185
    assert rep.rbe["pixelate"] == pytest.approx(0.05 / 0.3159147869674185, rel=1e-9)
    # rBE_motion = (0.25 - 0.25) / (...) = 0
    assert rep.rbe["motion_blur"] == 0.0
    assert rep.be["pixelate"] == pytest.approx(0.3 / ALEX_BREAST_PIXELATE, rel=1e-12)


def test_report_threshold_applies_to_clean_and_corrupted():
    # threshold .85: P_OK's positives .9 .8 -> second positive missed -> error 1/4 on clean
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(), threshold=0.85)
    assert rep.clean_error == pytest.approx(0.25, abs=1e-15)
    assert rep.threshold == 0.85
    # pixelate severity 1 uses P_OK too -> same error
    assert rep.errors["pixelate"][0] == pytest.approx(0.25, abs=1e-15)


def test_report_multilabel_default_threshold_works():
    # chestmnist: 14 labels; the reference crashes with the default threshold (indexes a float)
    rng = np.random.default_rng(3)
    n, L = 10, 14
    y = rng.integers(0, 2, (n, L))
    y[0], y[1] = 0, 1  # every label has both classes
    perfect = np.where(y == 1, 0.9, 0.1)
    inverted = np.where(y == 1, 0.1, 0.9)  # every label wrong -> BA 0, error 1
    cs = {"gaussian_blur": np.concatenate([perfect, perfect, inverted, inverted, inverted])}
    rep = ev.evaluate_robustness("chestmnist", y, perfect, cs)
    assert rep.task == MULTILABEL
    assert rep.threshold == (0.5,) * 14
    assert rep.clean_error == 0.0
    # errors 0 0 1 1 1 -> E_c = 3/5
    assert rep.errors["gaussian_blur"] == (0.0, 0.0, 1.0, 1.0, 1.0)
    assert rep.mean_errors["gaussian_blur"] == pytest.approx(0.6, abs=1e-15)
    # AlexNet chestmnist: clean 0.2839064387513035, gaussian_blur 0.3176801263607164
    assert rep.be["gaussian_blur"] == pytest.approx(0.6 / 0.3176801263607164, rel=1e-12)
    assert rep.rbe["gaussian_blur"] == pytest.approx(0.6 / (0.3176801263607164 - 0.2839064387513035), rel=1e-12)
    # per-label thresholds are accepted as well
    rep2 = ev.evaluate_robustness("chestmnist", y, perfect, cs, threshold=[0.5] * 14)
    assert rep2 == rep


def test_report_multiclass_one_dimensional_labels():
    # pathmnist, 9 classes, N = 9 (one sample per class): severity s gets s - 1 samples wrong
    # -> recall pattern: s - 1 classes with recall 0 -> BA = (9 - (s - 1)) / 9, error (s - 1) / 9
    # E_c = (0 + 1 + 2 + 3 + 4) / 9 / 5 = 10 / 45 = 2 / 9
    y = np.arange(9)
    clean = onehot(y, 9)
    sev = []
    for s in range(5):
        pred = y.copy()
        pred[:s] = (pred[:s] + 1) % 9
        sev.append(onehot(pred, 9))
    rep = ev.evaluate_robustness("pathmnist", y, clean, {"bubble": np.concatenate(sev)})
    assert rep.errors["bubble"] == pytest.approx(tuple(s / 9 for s in range(5)), abs=1e-15)
    assert rep.mean_errors["bubble"] == pytest.approx(2 / 9, abs=1e-15)
    # AlexNet pathmnist bubble 0.10818301335634566, clean 0.08839299601334816
    assert rep.be["bubble"] == pytest.approx((2 / 9) / 0.10818301335634566, rel=1e-12)
    assert rep.rbe["bubble"] == pytest.approx((2 / 9) / (0.10818301335634566 - 0.08839299601334816), rel=1e-12)
    assert rep.threshold is None


def test_report_all_corruptions_of_a_dataset():
    rng = np.random.default_rng(5)
    n, k = 30, 5
    y = rng.integers(0, k, n)
    clean = rng.random((n, k))
    cs = {c: rng.random((5 * n, k)) for c in DATASET_CORRUPTIONS["retinamnist"]}
    rep = ev.evaluate_robustness("retinamnist", y, clean, cs)
    assert rep.corruptions == DATASET_CORRUPTIONS["retinamnist"]
    # each per-severity error equals balanced_error on the slice
    for c in rep.corruptions:
        for s in range(5):
            assert rep.errors[c][s] == ev.balanced_error(y, cs[c][s * n:(s + 1) * n], ORDINAL)
    # BE, rBE and their means by their definitions (Di Salvo et al.) on the AlexNet baseline,
    # over all 8 corruptions: with two corruptions (the hand cases above) a median, or any
    # symmetric mean of two, equals the mean, so only a longer list pins the averaging down.
    base = ALEXNET_BASELINES["retinamnist"]
    e_clean = ev.balanced_error(y, clean, ORDINAL)
    assert rep.clean_error == e_clean
    e_c = {c: sum(rep.errors[c]) / 5 for c in rep.corruptions}
    be = {c: e_c[c] / base["errors"][c] for c in rep.corruptions}
    rbe = {c: (e_c[c] - e_clean) / (base["errors"][c] - base["clean_error"])
           for c in rep.corruptions}
    for c in rep.corruptions:
        assert rep.mean_errors[c] == pytest.approx(e_c[c], rel=1e-14)
        assert rep.be[c] == pytest.approx(be[c], rel=1e-12)
        assert rep.rbe[c] == pytest.approx(rbe[c], rel=1e-12, abs=1e-12)
    assert rep.mean_error == pytest.approx(sum(e_c.values()) / 8, rel=1e-14)
    assert rep.mean_be == pytest.approx(sum(be.values()) / 8, rel=1e-12)
    assert rep.mean_rbe == pytest.approx(sum(rbe.values()) / 8, rel=1e-12, abs=1e-12)


def test_report_custom_baseline_and_zero_denominator_rule():
    # custom baseline: E_clean(B) = .1, E_pixelate(B) = .4, E_motion(B) = .2
    base = {"clean_error": 0.1, "errors": {"pixelate": 0.4, "motion_blur": 0.2}}
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(), baseline=base)
    assert rep.baseline == "custom"
    # BE_pix = .3 / .4 = .75 ; rBE_pix = .3 / (.4 - .1) = 1 ; BE_mot = .25 / .2 = 1.25 ; rBE_mot = .25 / .1 = 2.5
    assert rep.be["pixelate"] == pytest.approx(0.75)
    assert rep.rbe["pixelate"] == pytest.approx(1.0)
    assert rep.be["motion_blur"] == pytest.approx(1.25)
    assert rep.rbe["motion_blur"] == pytest.approx(2.5)
    assert rep.mean_be == pytest.approx(1.0) and rep.mean_rbe == pytest.approx(1.75)
    # a custom baseline defines the valid names and their order (documented): the same numbers with its
    # errors listed motion_blur first give that order, not breastmnist's (pixelate first)
    base_rev = {"clean_error": 0.1, "errors": {"motion_blur": 0.2, "pixelate": 0.4}}
    rev = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(), baseline=base_rev)
    assert rev.corruptions == ("motion_blur", "pixelate")
    assert list(rev.to_dict()["corruptions"]) == ["motion_blur", "pixelate"]
    assert dict(rev.be) == dict(rep.be) and dict(rev.rbe) == dict(rep.rbe)
    # zero denominators raise ValueError naming the baseline, never NaN
    with pytest.raises(ValueError, match="baseline.*rBE"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(),
                               baseline={"clean_error": 0.2, "errors": {"pixelate": 0.4, "motion_blur": 0.2}})
    with pytest.raises(ValueError, match="baseline.*BE"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(),
                               baseline={"clean_error": 0.2, "errors": {"pixelate": 0.4, "motion_blur": 0.0}})
    # subnormal denominators used to give BE = inf (the module promises no NaN or infinity)
    with pytest.raises(ValueError, match="baseline.*overflows"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(),
                               baseline={"clean_error": 0.0, "errors": {"pixelate": 5e-324, "motion_blur": 0.2}})
    # an empty errors mapping is a bad value (ValueError; it was a TypeError), a list a bad type
    with pytest.raises(ValueError, match=r"baseline\['errors'\] must be a non-empty mapping.*empty"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(),
                               baseline={"clean_error": 0.1, "errors": {}})
    with pytest.raises(TypeError, match=r"baseline\['errors'\] must be a non-empty mapping.*list"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores(),
                               baseline={"clean_error": 0.1, "errors": [0.4]})
    # a custom baseline allows datasets outside MedMNIST-C, given a task
    rep2 = ev.evaluate_robustness("my_set", Y4, two_col(P_OK), breast_scores(), task=BINARY, baseline=base)
    assert rep2.be == rep.be
    with pytest.raises(ValueError, match="task"):
        ev.evaluate_robustness("my_set", Y4, two_col(P_OK), breast_scores(), baseline=base)
    # the labels of a corrupted set (the clean ones tiled five times) instead of the clean ones
    with pytest.raises(ValueError, match=r"y_true has 20 rows, 5 times the 4 of clean_scores: pass the "
                                         r"clean split's labels"):
        ev.evaluate_robustness("breastmnist", np.tile(Y4, 5), two_col(P_OK), breast_scores())
    # without a custom baseline, the message says how to get a report for such a dataset
    with pytest.raises(ValueError, match=r"for baseline='alexnet' .*got 'pathology96'\. Pass "
                                         r"baseline=\{'clean_error': e, 'errors': .*mean_corruption_error"):
        ev.evaluate_robustness("pathology96", Y4, two_col(P_OK), breast_scores(), task=BINARY)


def test_report_does_not_modify_inputs():
    cs = breast_scores()
    frozen = {k: frozen_copy(v) for k, v in cs.items()}
    y, clean = frozen_copy(Y4), frozen_copy(two_col(P_OK))
    rep = ev.evaluate_robustness("breastmnist", y, clean, frozen)
    for k in cs:
        np.testing.assert_array_equal(frozen[k], cs[k])
    assert rep.mean_errors["pixelate"] == pytest.approx(0.3)


def test_report_is_immutable_and_serialises(tmp_path):
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.clean_error = 1.0
    with pytest.raises(TypeError, match="does not support item assignment"):
        rep.errors["pixelate"] = (0.0,) * 5
    d = rep.to_dict()
    text = json.dumps(d, allow_nan=False)  # JSON-ready: plain types, no NaN
    assert json.loads(text) == d
    assert d["summary"]["be"] == rep.mean_be and d["summary"]["rbe"] == rep.mean_rbe
    assert list(d["corruptions"]) == ["pixelate", "motion_blur"]
    assert d["corruptions"]["pixelate"]["errors"] == list(rep.errors["pixelate"])
    assert d["severities"] == [1, 2, 3, 4, 5]
    # atomic JSON write: content equals to_dict, overwrites, no temporary file left behind
    out = tmp_path / "report.json"
    out.write_text("old")
    assert rep.to_json(out) == out
    assert json.loads(out.read_text()) == d
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    with pytest.raises(FileNotFoundError, match="missing_dir") as info:
        rep.to_json(tmp_path / "missing_dir" / "r.json")
    # the destination, not the temporary file the OS failed to create (".r.json.<hex>.tmp")
    assert "cannot write" in str(info.value) and ".tmp" not in str(info.value)
    assert str(tmp_path / "missing_dir" / "r.json") in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    # the usual permissions of a new file (0o666 under the umask), not mkstemp's 0o600
    umask = os.umask(0)
    os.umask(umask)
    fresh = rep.to_json(tmp_path / "fresh.json")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("indent, exc", [("x", TypeError), (True, TypeError), (2.0, TypeError),
                                         (None, TypeError), (-1, ValueError), (17, ValueError)])
def test_report_to_json_bad_indent_writes_nothing(tmp_path, indent, exc):
    """indent went to json.dumps unchecked: "x" wrote a file that is not JSON (every line started
    with "x"), -1 and True were taken silently."""
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    with pytest.raises(exc, match=r"indent must be an int in 0\.\.16"):
        rep.to_json(tmp_path / "r.json", indent=indent)
    assert list(tmp_path.iterdir()) == []
    out = rep.to_json(tmp_path / "r.json", indent=0)
    assert json.loads(out.read_text()) == rep.to_dict()
    assert out.read_text().startswith('{\n"dataset": "breastmnist"')  # 0: newlines, no spaces


def test_report_to_json_bad_path(tmp_path):
    """A folder as path used to fail in os.replace with an error naming a temporary file in the
    folder's parent; a non-path raised os.fspath's message, which names no argument."""
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError, match=r"path '.*/d' is a folder"):
        rep.to_json(tmp_path / "d")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        rep.to_json(str(tmp_path / "d"))
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and not any((tmp_path / "d").iterdir())
    for bad in (None, 3, b"r.json"):
        with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
            rep.to_json(bad)


def test_report_tables_written_to_files(tmp_path):
    """to_csv and to_markdown take a path as to_json does (to_csv(path) used to be a TypeError):
    the file holds exactly the returned text, written atomically; a folder or a non-path is
    refused before anything is written."""
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    out = rep.to_csv(tmp_path / "r.csv")
    assert out == tmp_path / "r.csv" and out.read_text() == rep.to_csv()
    out = rep.to_markdown(2, str(tmp_path / "r.md"))
    assert out == tmp_path / "r.md" and out.read_text() == rep.to_markdown(digits=2)
    (tmp_path / "d").mkdir()
    for write in (rep.to_csv, lambda p: rep.to_markdown(path=p)):
        with pytest.raises(IsADirectoryError, match=r"path '.*/d' is a folder"):
            write(tmp_path / "d")
        with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
            write(3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "r.csv", "r.md"]
    assert not any((tmp_path / "d").iterdir())


def test_report_pickles_and_deep_copies():
    """A report crosses process boundaries (multiprocessing, joblib): pickling used to fail with
    "cannot pickle 'mappingproxy' object", and so did copy.deepcopy."""
    import copy
    import pickle

    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    for other in (pickle.loads(pickle.dumps(rep)), copy.deepcopy(rep)):
        assert other == rep and other is not rep
        # the hand-worked numbers of test_report_perfect_clean_model survive the round trip
        assert other.errors["pixelate"] == pytest.approx((0, 0.25, 0.25, 0.5, 0.5), abs=1e-15)
        assert other.mean_errors["motion_blur"] == pytest.approx(0.25, abs=1e-15)
        assert other.be["pixelate"] == pytest.approx(0.3 / ALEX_BREAST_PIXELATE, rel=1e-12)
        assert list(other.corruptions) == ["pixelate", "motion_blur"]
        assert other.to_dict() == rep.to_dict()
        with pytest.raises(TypeError, match="does not support item assignment"):
            other.errors["pixelate"] = (0.0,) * 5  # still read-only
        with pytest.raises(dataclasses.FrozenInstanceError):
            other.clean_error = 1.0


def test_report_tables():
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    rows = list(csv.reader(io.StringIO(rep.to_csv())))
    assert rows[0] == ["corruption", "severity", "error", "balanced_accuracy"]
    assert rows[1] == ["clean", "0", "0.0", "1.0"]
    assert len(rows) == 1 + 1 + 2 * 5
    assert rows[2][:2] == ["pixelate", "1"] and rows[7][:2] == ["motion_blur", "1"]
    assert [float(r[2]) for r in rows[2:7]] == [0.0, 0.25, 0.25, 0.5, 0.5]
    assert [float(r[3]) for r in rows[2:7]] == [1.0, 0.75, 0.75, 0.5, 0.5]
    md = rep.to_markdown()
    assert "| corruption | s1 | s2 | s3 | s4 | s5 | mean | BE | rBE |" in md
    assert "| pixelate | 0.0000 | 0.2500 | 0.2500 | 0.5000 | 0.5000 | 0.3000 | 0.6504 | 0.9496 |" in md
    assert "| pixelate | 1.0000 | 0.7500 | 0.7500 | 0.5000 | 0.5000 | 0.7000 |" in md
    assert "| clean error | 0.0000 |" in md
    # every row of a table has as many cells as its header: 9 (errors table), 7 (balanced accuracy)
    pipes = [line.count("|") for line in md.splitlines() if line.startswith("| corruption") or
             line.startswith("|---") or line.startswith("| pixelate") or line.startswith("| motion_blur")]
    assert pipes == [3] + [10] * 4 + [8] * 4  # summary separator, errors table, balanced accuracy table
    assert "| clean error | 0.00 |" in rep.to_markdown(digits=np.int64(2))
    # a bad digits used to fail inside str.format ("Format specifier missing precision")
    for bad in (-1, 18, 10**6):  # 10**6 used to build a 19 MB string
        with pytest.raises(ValueError, match=r"digits must be an int in 0\.\.17"):
            rep.to_markdown(digits=bad)
    assert "| clean error | 0.00000000000000000 |" in rep.to_markdown(digits=17)
    for bad in ("4", 2.0, True, None):
        with pytest.raises(TypeError, match="digits"):
            rep.to_markdown(digits=bad)


@pytest.mark.parametrize(
    "change, exc, match",
    [
        (dict(dataset="mnist"), ValueError, "dataset"),
        (dict(dataset=None), TypeError, "dataset"),
        (dict(task="regression"), ValueError, "task"),
        (dict(baseline="resnet"), ValueError, "baseline"),
        (dict(baseline=3), TypeError, "baseline"),
        (dict(baseline={"clean_error": 0.1}), ValueError, "baseline"),
        (dict(baseline={"clean_error": 1.5, "errors": {"pixelate": 0.2}}), ValueError, "clean_error"),
        (dict(corrupted_scores={}), ValueError, "corrupted_scores"),
        (dict(corrupted_scores=[np.zeros((20, 2))]), TypeError, "corrupted_scores"),
        (dict(corrupted_scores={"bubble": np.zeros((20, 2))}), ValueError, "bubble"),
        (dict(corrupted_scores={"pixelate": np.zeros((16, 2))}), ValueError,
         r"corrupted_scores\['pixelate'\] must have 20 rows: the 4 images at each of the 5 severities, "
         r"severity-major.*got 16 rows"),
        (dict(corrupted_scores={"pixelate": np.zeros((20, 1))}), ValueError, r"corrupted_scores\['pixelate'\]"),
        (dict(corrupted_scores={"pixelate": np.full((20, 2), np.nan)}), ValueError, r"corrupted_scores"),
        (dict(clean_scores=np.zeros((4, 3))), ValueError, "clean_scores"),
        (dict(clean_scores=np.zeros((5, 2))), ValueError, "clean_scores"),
        (dict(y_true=np.array([0, 1, 2, 1])), ValueError, "y_true"),
        (dict(threshold=[0.5, 0.5]), TypeError, "threshold"),
        (dict(threshold=float("-inf")), ValueError, "threshold.*finite"),
        # NumPy's ragged-array error used to say neither which argument nor which corruption
        (dict(corrupted_scores={"pixelate": [[0.9, 0.1]] * 19 + [[0.5]]}), ValueError,
         r"corrupted_scores\['pixelate'\].*rectangular"),
    ],
)
def test_report_bad_input(change, exc, match):
    args = dict(dataset="breastmnist", y_true=Y4, clean_scores=two_col(P_OK),
                corrupted_scores={"pixelate": two_col(np.tile(P_OK, 5))})
    args.update(change)
    with pytest.raises(exc, match=match):
        ev.evaluate_robustness(**args)


def test_report_unknown_corruption_lists_valid_names():
    with pytest.raises(ValueError, match="speckle_noise"):
        ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), {"saturate": two_col(np.tile(P_OK, 5))})


def test_report_wrong_class_count_for_dataset():
    # pathmnist has 9 classes
    with pytest.raises(ValueError, match="clean_scores.*9"):
        ev.evaluate_robustness("pathmnist", [0, 1], np.eye(4)[[0, 1]], {"pixelate": np.eye(4)[[0, 1] * 5]})


# --------------------------------------------------------------------------------------------------------
# Pathology metrics
# --------------------------------------------------------------------------------------------------------


def test_top1_error_hand():
    # argmax rows: 0, 1, 1, 0 ; y = 0 1 2 1 -> wrong at i = 2, 3 -> 2/4
    s = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    assert ev.top1_error([0, 1, 2, 1], s) == 0.5
    assert ev.top1_error(np.array([[0], [1], [2], [1]]), s) == 0.5
    with pytest.raises(ValueError, match="scores"):
        ev.top1_error([0, 1, 2], s)
    with pytest.raises(ValueError, match="y_true"):
        ev.top1_error([0, 1, 3, 1], s)


def test_top1_errors_by_severity_hand():
    # N = 2, y = 0 1 ; severities: both right, one wrong, both wrong
    y = [0, 1]
    s = onehot([0, 1, 1, 1, 1, 0], 2)
    np.testing.assert_allclose(ev.top1_errors_by_severity(y, s, n_severities=3), [0.0, 0.5, 1.0])
    # severity-major rows, not image-major: sev 1 = (0, 1) right, sev 2 = (0, 0) half, sev 3 = (1, 0)
    # wrong -> [0, .5, 1] (read image-major, rows (0,1,0 | 0,1,0) would give [.5, .5, .5])
    s2 = onehot([0, 1, 0, 0, 1, 0], 2)
    np.testing.assert_allclose(ev.top1_errors_by_severity(y, s2, n_severities=3), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="corrupted_scores"):
        ev.top1_errors_by_severity(y, s)  # 6 rows, 5 severities * 2 expected
    with pytest.raises(TypeError, match="n_severities"):
        ev.top1_errors_by_severity(y, s, n_severities=3.0)


def test_corruption_error_and_mce_hand():
    # CE = (.1 + .2 + .3 + .4 + .5) / 5 = .3
    assert ev.corruption_error([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(0.3, abs=1e-15)
    table = np.array([[0.1, 0.1, 0.1, 0.1, 0.1], [0.2, 0.4, 0.6, 0.8, 1.0]])
    # CE_a = .1, CE_b = 3/5 = .6 ; mCE = .35
    np.testing.assert_allclose(ev.corruption_error(table), [0.1, 0.6], atol=1e-15)
    assert ev.mean_corruption_error(table) == pytest.approx(0.35, abs=1e-15)
    assert ev.mean_corruption_error({"a": table[0], "b": table[1].tolist()}) == pytest.approx(0.35, abs=1e-15)
    # a mapping may mix numbers of severities: CE_a = .2, CE_b = .4 -> .3
    assert ev.mean_corruption_error({"a": [0.2], "b": [0.3, 0.5]}) == pytest.approx(0.3, abs=1e-15)
    # three corruptions with a skewed spread (CE .1, .2, .9: mean .4, median .2), so the mean over
    # corruptions is not confused with another average that agrees on two values
    skewed = [[0.1, 0.1], [0.2, 0.2], [0.8, 1.0]]
    assert ev.mean_corruption_error(skewed) == pytest.approx(0.4, abs=1e-15)
    assert ev.mean_corruption_error(dict(zip("abc", skewed))) == pytest.approx(0.4, abs=1e-15)


def test_relative_corruption_error_hand():
    e = [0.1, 0.2, 0.3, 0.4, 0.5]
    # difference: mean(E_s - .05) = .3 - .05 = .25 ; ratio: .3 / .05 = 6
    assert ev.relative_corruption_error(e, 0.05) == pytest.approx(0.25, abs=1e-15)
    assert ev.relative_corruption_error(e, 0.05, form="difference") == pytest.approx(0.25, abs=1e-15)
    assert ev.relative_corruption_error(e, 0.05, form="ratio") == pytest.approx(6.0, rel=1e-14)
    # perfect clean model: the difference form is CE itself; the ratio form is undefined and raises
    assert ev.relative_corruption_error(e, 0.0) == pytest.approx(0.3, abs=1e-15)
    with pytest.raises(ValueError, match="clean_error"):
        ev.relative_corruption_error(e, 0.0, form="ratio")
    # better on corrupted than clean -> negative difference: .3 - .4 = -.1
    assert ev.relative_corruption_error(e, 0.4) == pytest.approx(-0.1, abs=1e-15)
    # 2-D: one value per corruption
    np.testing.assert_allclose(ev.relative_corruption_error([e, [0.2] * 5], 0.1), [0.2, 0.1], atol=1e-15)
    np.testing.assert_allclose(ev.relative_corruption_error([e, [0.2] * 5], 0.1, form="ratio"), [3.0, 2.0])


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # the message shows the first value out of range and where it is
        (lambda: ev.corruption_error([0.1, 1.2]), ValueError,
         r"^errors must be error rates in \[0, 1\]; got 1\.2 at index 1 \(percentages\? divide"),
        (lambda: ev.corruption_error([[0.1, 0.2], [0.3, np.nan]]), ValueError,
         r"^errors must be error rates in \[0, 1\]; got nan at index \(1, 1\)$"),
        (lambda: ev.corruption_error([0.1, -0.5, 250.0]), ValueError, r"got -0\.5 at index 1$"),
        (lambda: ev.corruption_error([]), ValueError, "errors"),
        (lambda: ev.corruption_error(np.zeros((2, 2, 2))), ValueError, "errors"),
        (lambda: ev.corruption_error(["a"]), TypeError, "errors"),
        (lambda: ev.mean_corruption_error({}), ValueError, "errors"),
        (lambda: ev.mean_corruption_error([0.1, 0.2]), ValueError, "errors"),
        (lambda: ev.mean_corruption_error({"a": [0.1, -0.1]}), ValueError, r"errors\['a'\]"),
        (lambda: ev.relative_corruption_error([0.1], 0.1, form="log"), ValueError, "form"),
        # a non-str form is a TypeError naming it (an array raised NumPy's "truth value of an
        # array ... is ambiguous", naming nothing; None and lists were "unknown" values)
        (lambda: ev.relative_corruption_error([0.1], 0.1, form=np.array(["ratio", "difference"])),
         TypeError, r"^form must be a str, one of \['difference', 'ratio'\]"),
        (lambda: ev.relative_corruption_error([0.1], 0.1, form=None), TypeError, r"^form must be a str"),
        (lambda: ev.relative_corruption_error([0.1], 0.1, form=["ratio"]), TypeError, r"^form must be a str"),
        (lambda: ev.relative_corruption_error([0.1], 1.5), ValueError, "clean_error"),
        # a subnormal clean error used to overflow the ratio to inf
        (lambda: ev.relative_corruption_error([0.5], 5e-324, form="ratio"), ValueError, "clean_error"),
        (lambda: ev.relative_corruption_error([0.1], "0.1"), TypeError, "clean_error"),
        # an int beyond the float range used to escape as OverflowError
        (lambda: ev.relative_corruption_error([0.1], 10 ** 400), ValueError, "clean_error"),
    ],
)
def test_pathology_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# CEC hand vectors (columns: clean, s1..s5); 15 pairs a < b, error when p_a <= p_b
DEC = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]  # strictly decreasing: 0 errors -> 0
INC = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9]  # strictly increasing: 15 errors -> 1
SWAP = [0.9, 0.8, 0.6, 0.7, 0.5, 0.4]  # s2 and s3 swapped: only pair (2, 3) -> 1/15
EQUAL = [0.5] * 6  # all ties: 15 errors -> 1
TIE = [0.9, 0.8, 0.8, 0.6, 0.5, 0.4]  # one tie (1, 2): counts as an error -> 1/15
MIXED = [0.5, 0.9, 0.1, 0.9, 0.2, 0.2]
# MIXED pairs (a, b) with p_a <= p_b: (0,1) (0,3) (1,3) (2,3) (2,4) (2,5) (4,5) -> 7/15


@pytest.mark.parametrize(
    "row, expected",
    [(DEC, 0.0), (INC, 1.0), (SWAP, 1 / 15), (EQUAL, 1.0), (TIE, 1 / 15), (MIXED, 7 / 15)],
)
def test_cec_hand_vectors(row, expected):
    assert ev.corruption_error_of_confidence(np.array([row])) == pytest.approx(expected, abs=1e-15)


def test_cec_mean_per_image_and_no_mutation():
    p = np.array([DEC, INC, SWAP, EQUAL])
    p0 = p.copy()
    # mean = (0 + 1 + 1/15 + 1) / 4 = (31/15) / 4 = 31/60
    assert ev.corruption_error_of_confidence(p) == pytest.approx(31 / 60, abs=1e-15)
    per = ev.corruption_error_of_confidence(p, per_image=True)
    assert per.shape == (4,) and per.dtype == np.float64
    np.testing.assert_allclose(per, [0, 1, 1 / 15, 1], atol=1e-15)
    np.testing.assert_array_equal(p, p0)
    assert ev.corruption_error_of_confidence(frozen_copy(p)) == pytest.approx(31 / 60, abs=1e-15)
    assert ev.corruption_error_of_confidence(np.asfortranarray(p).astype(np.float32)) == pytest.approx(31 / 60)
    # fewer severities: (N, 3) has 3 pairs; [.9, .5, .7]: pair (1, 2) only -> 1/3
    assert ev.corruption_error_of_confidence([[0.9, 0.5, 0.7]]) == pytest.approx(1 / 3, abs=1e-15)


# The messages are matched in full: match="p" (as before) accepted almost any message, e.g. the
# "not enough values to unpack" of a missing 2-D check.
_CEC_SHAPE = r"^p must have shape \(N, S \+ 1\) with N >= 1 images and S >= 1 severities .*got shape "


@pytest.mark.parametrize(
    "p, kwargs, exc, match",
    [
        (np.array(DEC), {}, ValueError, _CEC_SHAPE + r"\(6,\)$"),  # 1-D
        (np.zeros((3, 1)), {}, ValueError, _CEC_SHAPE + r"\(3, 1\)$"),  # no severity column
        (np.zeros((0, 6)), {}, ValueError, _CEC_SHAPE + r"\(0, 6\)$"),
        (np.array([[np.nan] * 6]), {}, ValueError, r"^p contains NaN$"),
        (np.array([["a"] * 6]), {}, TypeError, r"^p must be a real-valued array; got dtype <U1$"),
        (np.array([DEC]), {"per_image": 1}, TypeError, r"^per_image must be a bool; got int$"),
    ],
)
def test_cec_bad_input(p, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ev.corruption_error_of_confidence(p, **kwargs)


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_cec_wide_input_is_not_quadratic_in_python():
    """Many columns (severities stacked as rows, (S + 1, N), by mistake): the count ran over the
    m (m - 1) / 2 column pairs in Python, 72 million here (minutes; about 15 for (6, 32768));
    one pass per column takes well under a second. Row 0 strictly decreasing: no pair counts;
    row 1 constant: every pair is a tie, an error."""
    m = 12_000
    p = np.stack([np.linspace(1.0, 0.0, m), np.full(m, 0.5)])

    def too_slow(signum, frame):
        raise TimeoutError("corruption_error_of_confidence took over 20 s on a (2, 12000) array")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(20)
    try:
        with pytest.warns(UserWarning, match=r"p has shape \(2, 12000\): 12000 columns .* Pass p\.T"):
            per = ev.corruption_error_of_confidence(p, per_image=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    np.testing.assert_array_equal(per, [0.0, 1.0])


@pytest.mark.parametrize("shape, warns", [
    ((6, 12), True),      # 12 columns, 6 rows: the transposed (S + 1, N) layout of 11 images
    ((12, 12), False),    # as many images as columns
    ((3, 11), False),     # ten severities for three images: possible, not flagged
    ((3, 6), False),      # the usual five severities, few images
    ((40, 6), False),
])
def test_cec_warns_on_a_transposed_layout(shape, warns):
    p = np.random.default_rng(0).random(shape)
    if warns:
        with pytest.warns(UserWarning, match="CEC expects one row per image"):
            ev.corruption_error_of_confidence(p)
    else:
        ev.corruption_error_of_confidence(p)  # filterwarnings = error: any warning fails


@settings(deadline=None, max_examples=100)
@given(st.integers(1, 20), st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_property_cec_matches_naive(n, m, seed):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 4, (n, m)) / 4  # small value set -> many ties
    pairs = m * (m - 1) // 2
    per = [Fraction(sum(1 for a, b in combinations(range(m), 2) if row[a] <= row[b]), pairs) for row in p]
    got = ev.corruption_error_of_confidence(p, per_image=True)
    np.testing.assert_allclose(got, [float(v) for v in per], atol=1e-15)
    assert ev.corruption_error_of_confidence(p) == pytest.approx(float(sum(per) / n), abs=1e-12)


def test_top1_confidence_hand():
    # N = 2, K = 3
    clean = np.array([[0.7, 0.2, 0.1], [0.3, 0.3, 0.4]])
    corrupted = np.array(
        [
            [0.6, 0.3, 0.1], [0.2, 0.2, 0.6],  # severity 1
            [0.5, 0.4, 0.1], [0.1, 0.1, 0.8],  # severity 2
            [0.1, 0.5, 0.4], [0.5, 0.25, 0.25],  # severity 3
            [0.2, 0.2, 0.6], [0.45, 0.45, 0.1],  # severity 4
            [0.34, 0.33, 0.33], [1.0, 0.0, 0.0],  # severity 5
        ]
    )
    expected = np.array([[0.7, 0.6, 0.5, 0.5, 0.6, 0.34], [0.4, 0.6, 0.8, 0.5, 0.45, 1.0]])
    c0, k0 = clean.copy(), corrupted.copy()
    p = ev.top1_confidence(frozen_copy(clean), frozen_copy(corrupted))
    np.testing.assert_array_equal(p, expected)
    assert p.dtype == np.float64 and p.flags.c_contiguous
    np.testing.assert_array_equal(clean, c0)
    np.testing.assert_array_equal(corrupted, k0)
    # image 0: .7 .6 .5 .5 .6 .34 -> pairs with p_a <= p_b: (1,4) (2,3) (2,4) (3,4) -> 4/15
    # image 1: .4 .6 .8 .5 .45 1.0 -> non-errors (p_a > p_b): (1,3) (1,4) (2,3) (2,4) (3,4) -> 10/15
    # CEC = (4/15 + 10/15) / 2 = 7/15
    assert ev.corruption_error_of_confidence(p) == pytest.approx(7 / 15, abs=1e-15)


def test_top1_confidence_bad_input():
    clean = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="corrupted_probs"):
        ev.top1_confidence(clean, np.full((8, 2), 0.5))  # 5 * 2 rows expected
    with pytest.raises(ValueError, match="corrupted_probs"):
        ev.top1_confidence(clean, np.full((10, 3), 1 / 3))
    with pytest.raises(ValueError, match="clean_probs"):
        ev.top1_confidence(np.array([[2.0, -1.0], [0.5, 0.5]]), np.full((10, 2), 0.5))  # logits
    with pytest.raises(ValueError, match="clean_probs"):
        ev.top1_confidence(np.array([[0.9, 0.9], [0.5, 0.5]]), np.full((10, 2), 0.5))  # rows sum to 1.8
    with pytest.raises(ValueError, match="n_severities"):
        ev.top1_confidence(clean, np.full((10, 2), 0.5), n_severities=0)
    # A (5, N, K) stack (one array per severity) is the natural mistake: the message gives the
    # expected 2-D shape, 5 severities x 2 images = 10 rows, not a bare "(N, K)".
    for bad in (np.full((5, 2, 2), 0.5), np.full((8, 2), 0.5)):
        with pytest.raises(ValueError, match=r"corrupted_probs must have shape \(10, K\)"):
            ev.top1_confidence(clean, bad)


def test_public_api_is_listed():
    for name in ev.__all__:
        assert hasattr(ev, name)
    assert ev.N_SEVERITIES == 5


def test_markdown_escapes_pipes_in_custom_names():
    # A custom baseline allows any dataset and corruption names; a bare "|" would add a cell.
    base = {"clean_error": 0.1, "errors": {"ink|blot": 0.4, "motion_blur": 0.2}}
    scores = breast_scores()
    rep = ev.evaluate_robustness("my|set", Y4, two_col(P_OK),
                                 {"ink|blot": scores["pixelate"], "motion_blur": scores["motion_blur"]},
                                 task=BINARY, baseline=base)
    md = rep.to_markdown()
    assert "**my\\|set**" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| ink")]
    assert len(rows) == 2 and all(r.startswith("| ink\\|blot | ") for r in rows)
    # unescaped pipes: 5 severities + name + mean + BE + rBE = 9 cells -> 10 in the error table,
    # 5 + name + mean = 7 cells -> 8 in the accuracy table
    bare = [len(re.findall(r"(?<!\\)\|", r)) for r in rows]
    assert bare == [10, 8]


def test_report_paths_expand_home(tmp_path, monkeypatch):
    # "~/r.json" was written to a folder literally named "~" under the working directory, while
    # generate(out="~/...") and CorruptedSet("~/...") expand it.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path)
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    written = [rep.to_json("~/r.json"), rep.to_csv("~/r.csv"), rep.to_markdown(path="~/r.md")]
    assert written == [tmp_path / "home" / n for n in ("r.json", "r.csv", "r.md")]
    assert json.loads((tmp_path / "home" / "r.json").read_text()) == rep.to_dict()
    assert not (tmp_path / "~").exists()


def test_report_paths_of_an_unknown_user_stay_as_given(tmp_path, monkeypatch):
    # "~name/r.json" of a user that does not exist raised RuntimeError ("Could not determine
    # home directory.", from pathlib's expanduser), undocumented; os.path.expanduser, which
    # generate and CorruptedSet use, leaves such a path unchanged.
    monkeypatch.chdir(tmp_path)
    name = "~medmnistc-fast-no-such-user"
    assert os.path.expanduser(name + "/r.json") == name + "/r.json"
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    with pytest.raises(FileNotFoundError):
        rep.to_json(name + "/r.json")
    (tmp_path / name).mkdir()
    assert rep.to_csv(name + "/r.csv").resolve() == tmp_path / name / "r.csv"
    assert (tmp_path / name / "r.csv").read_text() == rep.to_csv()


def test_report_path_ending_in_a_separator_is_a_folder(tmp_path):
    # pathlib drops a trailing "/": "r.json/" was written to the file r.json.
    rep = ev.evaluate_robustness("breastmnist", Y4, two_col(P_OK), breast_scores())
    for write in (rep.to_json, rep.to_csv, lambda p: rep.to_markdown(path=p)):
        with pytest.raises(IsADirectoryError, match="is a folder"):
            write(str(tmp_path / "r.json") + "/")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", range(12))
def test_report_rbe_is_exactly_zero_when_no_severity_changes_the_predictions(seed):
    # The corrupted scores are the clean ones at every severity, so E_c = E_clean and rBE_c = 0
    # exactly; mean(errors) - E_clean used to leave ~1e-16 of rounding for 15 of 40 such seeds.
    r = np.random.default_rng(seed)
    y = r.integers(0, 9, 37)
    p = r.random((37, 9))
    p /= p.sum(1, keepdims=True)
    rep = ev.evaluate_robustness("pathmnist", y, p, {c: np.tile(p, (5, 1)) for c in ("pixelate", "bubble")})
    assert rep.rbe["pixelate"] == 0.0 and rep.rbe["bubble"] == 0.0 and rep.mean_rbe == 0.0
    assert rep.clean_balanced_accuracy + rep.clean_error == pytest.approx(1.0, abs=1e-15)
