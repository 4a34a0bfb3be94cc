"""Generator draws computed from raw PCG64 words (corruptions/_draws.py, rng.raw_words) against
NumPy's own ``Generator.integers`` calls (the oracle), and the samplers that use them against
their ``Generator`` definitions."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medmnistc_fast import rng
from medmnistc_fast.corruptions import _draws as D
from medmnistc_fast.corruptions import artifacts as A
from medmnistc_fast.corruptions._draws import RANGE_LIMIT, bounded
from medmnistc_fast.corruptions._spec import Context

_KEY = st.integers(0, 2**64 - 1)
# Closed ranges [low, low + span]: empty-width ones draw nothing; spans near 2**31 and 2**32 reject
# about half of the 32-bit outputs, which exercises the rejection loop.
_SPAN = st.one_of(st.integers(0, 300), st.integers(2**31 - 2, 2**31 + 2),
                  st.integers(RANGE_LIMIT - 3, RANGE_LIMIT - 1))
_RANGES = st.lists(st.tuples(st.integers(-1000, 1000), _SPAN), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(_KEY, _RANGES)
def test_bounded_equals_generator_integers(key, ranges):
    g = rng.generator(key)
    want = [int(g.integers(lo, lo + span, endpoint=True)) for lo, span in ranges]
    words = rng.raw_words(key, 64)
    pos, got = 0, []
    for lo, span in ranges:
        value, pos = bounded(words, pos, lo, lo + span)
        assert pos >= 0  # 128 outputs: far more than 12 draws need
        got.append(int(value))
    assert got == want


def test_bounded_reports_running_out_of_words():
    words = rng.raw_words(5, 1)  # two 32-bit outputs
    pos = 0
    for _ in range(2):
        _, pos = bounded(words, pos, 0, 10)
    assert pos == 2
    assert bounded(words, pos, 3, 3) == (3, 2)  # an empty-width range draws nothing
    assert bounded(words, pos, 0, 10)[1] == -1


def test_raw_words_are_the_generators_outputs():
    words = rng.raw_words(2**64 - 1, 4)
    g = rng.generator(2**64 - 1)
    assert words.dtype == np.uint64 and words.shape == (4,)
    assert np.array_equal((words >> np.uint64(11)) * (1.0 / 2**53), g.random(4))


_SHAPES = st.sampled_from([(224, 224, 3), (224, 224, 1), (28, 28, 3), (40, 64, 1), (8, 12, 3),
                           (300, 9, 1), (1000, 600, 3)])


def _same(got: dict, want: dict):
    assert set(got) == set(want)
    for k in want:
        if isinstance(want[k], np.ndarray):
            assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
        else:
            assert got[k] == want[k], k


def _bubble_by_generator(param, ctx):
    r, fine_outer, inner, outer, x, y = A._bubble_generator_draws(
        ctx.key, int(param[1]), max(A.BUBBLE_MIN_RADIUS, int(param[0])), ctx.scale,
        ctx.shape[1], ctx.shape[0])
    if ctx.supersample > 1.0:
        return {"x": x, "y": y, "inner": r, "outer": fine_outer, "supersample": ctx.supersample}
    return {"x": x, "y": y, "inner": inner, "outer": outer, "supersample": 1.0}


@settings(max_examples=400, deadline=None)
@given(_KEY, _SHAPES, st.integers(0, 250), st.integers(0, 40))
def test_bubble_sample_equals_its_generator_draws(key, shape, max_radius, max_bubbles):
    ctx = Context(shape, key, 3)
    _same(A.bubble_sample((max_radius, max_bubbles), ctx),
          _bubble_by_generator((max_radius, max_bubbles), ctx))


@settings(max_examples=400, deadline=None)
@given(_KEY, _SHAPES, st.integers(-1, 12), st.sampled_from([None, 12, 24, 42]),
       st.integers(1, 5))
def test_stain_sample_equals_its_generator_draws(key, shape, max_marks, ink_side, severity):
    ctx = Context(shape, key, severity)
    param = max_marks if ink_side is None else (max_marks, ink_side)
    got = A.stain_deposit_sample(param, ctx)
    ink, x, y = A._stain_generator_draws(key, max_marks, shape[1], shape[0], got["side"],
                                         A._scaled(A.STAIN_MARGIN, ctx.scale))
    _same(got, {"ink_side": got["ink_side"], "side": got["side"], "ink": ink, "x": x, "y": y})


def test_samplers_take_more_words_when_they_run_out(monkeypatch):
    # The first call gets a single word (two 32-bit outputs): both samplers must ask again and
    # still give the Generator's draws.
    calls = []

    def short_then_full(key, n):
        calls.append(n)
        return rng.raw_words(key, 1 if len(calls) == 1 else n)

    monkeypatch.setattr(D, "raw_words", short_then_full)
    ctx = Context((224, 224, 3), 77, 5)
    _same(A.bubble_sample((17, 25), ctx), _bubble_by_generator((17, 25), ctx))
    assert len(calls) == 2 and calls[1] == 4 * calls[0]
    calls.clear()
    got = A.stain_deposit_sample(5, ctx)
    ink, x, y = A._stain_generator_draws(77, 5, 224, 224, got["side"], A.STAIN_MARGIN)
    _same(got, {"ink_side": 32, "side": 32, "ink": ink, "x": x, "y": y})
    assert len(calls) == 2


def test_out_of_range_parameters_use_the_generator_calls():
    ctx = Context((224, 224, 3), 9, 3)
    _same(A.bubble_sample((2**33, 9), ctx), _bubble_by_generator((2**33, 9), ctx))
    with pytest.raises(ValueError, match="negative"):  # NumPy's own error for a negative count
        A.bubble_sample((5, -3), ctx)


@pytest.mark.parametrize("radii", [(70, 90), (3, 200), (-1, 5)])
def test_bubble_kernel_radii_past_the_shared_table(radii):
    # Radii above the cached table's 64 rows (and a negative one, which draws nothing) give the
    # layer of _bubble_layer on a table built for them, pasted with _paste_white.
    image = np.random.default_rng(3).integers(0, 256, (150, 170, 3), dtype=np.uint8)
    x, y = np.array([40, 120], np.int64), np.array([60, 100], np.int64)
    inner, outer = np.array(radii, np.int64), np.array(radii, np.int64) + 2
    table = A._disk_table(np.concatenate([inner, outer]))
    alpha = A._bubble_layer(150, 170, 3, x, y, inner, outer, table, A.BUBBLE_RIM_ALPHA,
                            A.BUBBLE_BODY_ALPHA)
    want = A._paste_white(image, alpha.reshape(image.shape), np.empty_like(image))
    got = A.bubble_kernel(image, x, y, inner, outer)
    assert got is not image and np.array_equal(got, want)
