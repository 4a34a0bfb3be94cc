"""``Generator.integers`` draws computed from raw PCG64 words (:func:`medmnistc_fast.rng.raw_words`).

A sampler that builds ``rng.generator(key)`` and only calls ``integers`` on it with ranges below
``2**32 - 1`` draws the same values as :func:`bounded` applied to ``raw_words(key, m)`` in the
same order, as long as the ``m`` words suffice. This is NumPy's own algorithm
(``numpy/random/src/distributions/distributions.c``, ``random_bounded_uint64`` and
``random_bounded_uint64_fill`` with ``use_masked=False``, as ``Generator.integers`` calls them
for int64 output, scalar, ``size=`` and broadcast bounds alike):

- a closed range ``[low, low + rng]`` with ``rng == 0`` gives ``low`` and draws nothing;
- otherwise Lemire's method on the next 32-bit output ``u``: ``m = u * (rng + 1)``; if the low
  32 bits of ``m`` are below ``(2**32 - 1 - rng) % (rng + 1)`` the draw is rejected and the next
  ``u`` tried; the value is ``low + (m >> 32)``;
- a fresh PCG64's 32-bit outputs are the halves of its 64-bit outputs, low half first (its
  ``next_uint32`` keeps the high half for the next call; ``random_raw`` does not touch that
  buffer, which a fresh generator has empty).

Samplers keep the ``Generator`` calls they replace as the definition and use this for speed:
the draws are plain integer arithmetic in a ``nogil`` Numba function, where each
``Generator.integers`` call cost 1-4 us of Python and NumPy overhead holding the GIL.
tests/test_draws.py checks every sampler that uses it against the ``Generator`` calls.
"""
from __future__ import annotations

import numba
import numpy as np

from .._config import NJIT
from ..rng import raw_words

__all__ = ["bounded", "RANGE_LIMIT", "with_words"]

#: Ranges ``high - low`` must stay below this (NumPy's 32-bit path, ``rng < 2**32 - 1``).
RANGE_LIMIT = 2**32 - 1

_LOW32 = np.uint64(0xFFFFFFFF)


@numba.njit(inline="always")
def _u32(words, i):  # pragma: no cover - compiled
    # 32-bit output i of the words' stream: low half of word i // 2 when i is even, else high.
    w = words[i >> 1]
    return (w >> np.uint64(32)) if i & 1 else (w & _LOW32)


@numba.njit(**NJIT)
def bounded(words, pos, low, high):  # pragma: no cover - compiled
    """``Generator.integers(low, high, endpoint=True)`` from 32-bit output ``pos`` on.

    ``0 <= high - low < 2**32 - 1``. Returns ``(value, next pos)``; ``next pos`` is -1 when the
    words ran out (then the value is meaningless and the caller takes more words).
    """
    if high == low:
        return low, pos
    rng = np.uint64(high - low)
    excl = rng + np.uint64(1)
    n = 2 * words.shape[0]
    if pos >= n:
        return low, -1
    m = _u32(words, pos) * excl
    pos += 1
    leftover = m & _LOW32
    if leftover < excl:
        threshold = (_LOW32 - rng) % excl
        while leftover < threshold:
            if pos >= n:
                return low, -1
            m = _u32(words, pos) * excl
            pos += 1
            leftover = m & _LOW32
    return low + np.int64(m >> np.uint64(32)), pos


def with_words(draw, key: int, n_draws: int, *args) -> tuple:
    """``draw(raw_words(key, m), *args)`` without its leading ``pos``, with enough words.

    ``draw`` is a compiled sampler returning ``(pos, ...)``, ``pos`` -1 when the words ran out.
    It first gets the words for ``n_draws`` 32-bit draws plus 16 spare (rejections are rare),
    then four times as many for as long as it runs out; every attempt starts from the same
    stream, so the result does not depend on the first ``m``.
    """
    m = (n_draws + 1) // 2 + 8
    while True:
        result = draw(raw_words(key, m), *args)
        if result[0] >= 0:
            return result[1:]
        m *= 4
