"""Per-image randomness keyed by (seed, dataset, corruption, severity, index).

Every random draw of a corruption comes from a 64-bit *image key*::

    base = SeedSequence(seed, spawn_key=(crc32(dataset), crc32(corruption), severity))
               .generate_state(1, uint64)[0]
    key(index) = splitmix64(base XOR splitmix64(index))

so image ``k``'s output depends only on those five values and its pixels, whatever the batch,
thread count or process split. Samplers build a :class:`numpy.random.Generator` (PCG64) from
the key for scalar draws (angles, positions); the noise kernels use the key directly as the
state of a SplitMix64 counter stream (its word ``i = 0, 1, ...`` is ``splitmix64(key + i * gamma)``,
SplitMix64's finaliser of ``key + (i + 1) * gamma``; ``splitmix64(x)`` above is the finaliser
of ``x + gamma``). No global random state (``numpy.random.*`` or :mod:`random`) is ever touched.

References
----------
G. L. Steele, D. Lea, C. H. Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014 (SplitMix64; constants 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB).
"""
from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np
from numpy.random.bit_generator import ISeedSequence

from . import _native

__all__ = ["base_key", "image_key", "image_keys", "generator", "raw_words", "fresh_seed",
           "key_from_seed"]

_M64 = (1 << 64) - 1
#: SplitMix64's increment ("golden gamma", the odd integer nearest 2**64 / phi) of Steele, Lea
#: and Flood, OOPSLA 2014 (see the module References); the counter streams of the noise kernels
#: and of :mod:`medmnistc_fast.corruptions.pathology` step by it.
GAMMA = 0x9E3779B97F4A7C15
# SplitMix64's finaliser multipliers (same reference; David Stafford's "Mix13" variant).
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _splitmix64_array(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of ``x + GAMMA`` on a uint64 array (wrapping arithmetic)."""
    z = x + np.uint64(GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def _words(value: int) -> list:
    """uint32 words of an int >= 0, least significant first (``[0]`` for 0): how
    :class:`numpy.random.SeedSequence` reads an int entropy or spawn-key entry."""
    out = []
    while value:
        out.append(value & 0xFFFFFFFF)
        value >>= 32
    return out or [0]


def _numpy_state(entropy: int, spawn_key: tuple, n_words: int) -> np.ndarray:
    return np.random.SeedSequence(entropy, spawn_key=spawn_key).generate_state(n_words, np.uint64)


_NATIVE_OK = None  # whether the native hash gave NumPy's words (checked on first use)


def seed_state(entropy: int, spawn_key: tuple = (), n_words: int = 1) -> np.ndarray:
    """``SeedSequence(entropy, spawn_key=spawn_key).generate_state(n_words, np.uint64)``.

    Computed by ``_native.seed_sequence_state`` (about 0.5 us instead of NumPy's 7 us; the
    algorithm of NumPy's SeedSequence, see csrc/seed.cpp). On first use its words are compared
    with NumPy's for a few entropies; on any difference (a NumPy that changed its algorithm)
    NumPy computes them instead.

    Parameters
    ----------
    entropy : int >= 0
    spawn_key : tuple of int >= 0
    n_words : int >= 1

    Returns
    -------
    ndarray of uint64, shape (n_words,)

    Raises
    ------
    ValueError
        ``entropy`` or an entry of ``spawn_key`` negative (as NumPy's ``SeedSequence`` raises).
    """
    # Checked here for both paths: _words of a negative int would never terminate.
    if entropy < 0 or (spawn_key and min(spawn_key) < 0):
        raise ValueError(f"entropy and spawn_key entries must be non-negative ints; got "
                         f"entropy={entropy!r}, spawn_key={spawn_key!r}")
    global _NATIVE_OK
    if _NATIVE_OK is None:
        probes = [(0, ()), (1, ()), (2**32, ()), (2**64 - 1, ()), (2**127 + 12345, ()),
                  (7, (1, 2**40, 3)), (2**100, (5,))]
        try:
            _NATIVE_OK = all(np.array_equal(_native_state(e, k, 5), _numpy_state(e, k, 5))
                             for e, k in probes)
        except Exception:  # noqa: BLE001 - any failure: NumPy's own SeedSequence
            _NATIVE_OK = False
    if not _NATIVE_OK:
        return _numpy_state(entropy, spawn_key, n_words)
    return _native_state(entropy, spawn_key, n_words)


def _native_state(entropy: int, spawn_key: tuple, n_words: int) -> np.ndarray:
    words = _words(entropy)
    if spawn_key:
        # SeedSequence pads the entropy to its pool of 4 words before the spawn key's words.
        words += [0] * (4 - len(words))
        for k in spawn_key:
            words += _words(k)
    return _native.seed_sequence_state(words, n_words)


class _KeySeed(ISeedSequence):
    """The seed sequence ``SeedSequence(key)`` as far as a bit generator asks it: its
    ``generate_state`` words (:func:`seed_state`), nothing else (no spawning)."""

    __slots__ = ("_key",)

    def __init__(self, key: int):
        self._key = key

    def generate_state(self, n_words, dtype=np.uint32):
        if np.dtype(dtype) == np.uint64:
            return seed_state(self._key, (), n_words)
        if np.dtype(dtype) != np.uint32:
            raise ValueError("only support uint32 or uint64")
        return seed_state(self._key, (), (n_words + 1) // 2).view(np.uint32)[:n_words].copy()


def fresh_seed() -> int:
    """A new 128-bit seed from the operating system's entropy (for ``seed=None``).

    Returns
    -------
    int in [0, 2**128)
        ``SeedSequence().entropy``: NumPy draws 128 bits from the OS (``secrets``).
    """
    return int(np.random.SeedSequence().entropy)


def key_from_seed(seed) -> int:
    """The 64-bit key of a functional-layer call: ``SeedSequence(seed).generate_state(1)``.

    Parameters
    ----------
    seed : int >= 0 or None
        Already validated by the caller (:func:`medmnistc_fast._validation.check_seed`): it is
        passed through ``int()``, so a float is truncated, not refused. None: fresh OS entropy
        (:func:`fresh_seed`).

    Returns
    -------
    int in [0, 2**64)
        ``SeedSequence(seed).generate_state(1, uint64)[0]``.

    Raises
    ------
    ValueError
        ``seed`` negative (:func:`seed_state`).
    """
    if seed is None:
        seed = fresh_seed()
    return int(seed_state(int(seed))[0])


@lru_cache(maxsize=4096)
def base_key(seed: int, dataset: str, corruption: str, severity: int) -> int:
    """The 64-bit key shared by all images of one (seed, dataset, corruption, severity).

    Parameters
    ----------
    seed : int, >= 0
    dataset, corruption : str
        Registry names; hashed with CRC-32 (stable across processes and Python versions,
        unlike ``hash``). Not checked against the registry: any str gives a key.
    severity : int, 1..5
        Not range-checked here (the public API checks 1..5 first): any int >= 0 gives a key.

    Returns
    -------
    int in [0, 2**64)

    Raises
    ------
    ValueError
        ``seed`` or ``severity`` negative.
    """
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    spawn = (zlib.crc32(dataset.encode()), zlib.crc32(corruption.encode()), int(severity))
    return int(seed_state(int(seed), spawn)[0])


def _splitmix64_int(x: int) -> int:
    """SplitMix64 finaliser of ``x + GAMMA`` on a Python int (one key, no array overhead)."""
    z = (x + GAMMA) & _M64
    z = ((z ^ (z >> 30)) * _MIX1) & _M64
    z = ((z ^ (z >> 27)) * _MIX2) & _M64
    return z ^ (z >> 31)


def image_key(base: int, index: int) -> int:
    """The key of one image: ``splitmix64(base ^ splitmix64(index))`` (see :func:`image_keys`).

    Parameters
    ----------
    base : int in [0, 2**64)
        From :func:`base_key`.
    index : int in [0, 2**64)
        The image's index in its dataset.

    Returns
    -------
    int in [0, 2**64)
        Equal to ``int(image_keys(base, index))``.

    Raises
    ------
    ValueError
        ``index`` outside ``0..2**64 - 1`` (a negative index used to wrap silently).
    TypeError
        ``index`` or ``base`` not an int (a float fails in the bit arithmetic).
    """
    if not 0 <= index <= _M64:
        raise ValueError(f"index must be in 0..2**64 - 1; got {index!r}")
    return _splitmix64_int(base ^ _splitmix64_int(index))


def image_keys(base: int, indices) -> np.ndarray:
    """Per-image keys for the given image indices.

    Parameters
    ----------
    base : int
        From :func:`base_key`.
    indices : int or array_like of int, >= 0
        Image indices (``index`` of :func:`medmnistc_fast.corrupt`, ``start + i`` in a batch).

    Returns
    -------
    ndarray of uint64, same shape as ``indices``

    Raises
    ------
    TypeError
        ``indices`` not integers, or a Python int beyond the uint64 range (NumPy makes it an
        object array).
    ValueError
        A negative index.
    """
    idx = np.asarray(indices)
    if idx.dtype != np.uint64:
        if idx.dtype.kind not in "iu" and idx.size:
            raise TypeError(f"indices must be integers in 0..2**64 - 1; got dtype {idx.dtype}")
        if idx.dtype.kind == "i" and idx.size and idx.min() < 0:
            raise ValueError(f"indices must be >= 0; got {idx.min()}")
        idx = idx.astype(np.uint64)
    with np.errstate(over="ignore"):
        return _splitmix64_array(np.uint64(base) ^ _splitmix64_array(idx))


def generator(key: int) -> np.random.Generator:
    """A PCG64 generator for one image's scalar draws (angles, counts, positions): the
    generator of ``np.random.PCG64(key)``, seeded through :func:`seed_state` (about 2 us instead
    of 8).

    Parameters
    ----------
    key : int >= 0
        An image key (:func:`image_key`), in [0, 2**64).

    Returns
    -------
    numpy.random.Generator
        New, over PCG64; its draws equal those of ``np.random.Generator(np.random.PCG64(key))``.

    Raises
    ------
    ValueError
        ``key`` negative (:func:`seed_state`).
    """
    return np.random.Generator(np.random.PCG64(_KeySeed(int(key))))


def raw_words(key: int, n: int) -> np.ndarray:
    """The first ``n`` 64-bit outputs of the bit generator of :func:`generator` ``(key)``.

    A fresh generator's draws are read off these words (NumPy's ``distributions.c`` and
    PCG64's ``next_uint32`` / ``next_double``): its 32-bit stream (every ``Generator.integers``
    of a range below ``2**32 - 1``) is the words' halves, low half first; its doubles
    (``Generator.random``) are ``(word >> 11) * 2**-53``. Samplers that only make such draws
    take the words in one call and do the arithmetic in a compiled function
    (:mod:`medmnistc_fast.corruptions._draws`) instead of one ``Generator`` call per quantity.

    Parameters
    ----------
    key : int in [0, 2**64)
    n : int >= 0

    Returns
    -------
    ndarray of uint64, shape (n,)

    Raises
    ------
    ValueError
        ``key`` or ``n`` negative (``n``: NumPy's "negative dimensions are not allowed").
    """
    return np.random.PCG64(_KeySeed(int(key))).random_raw(n)
