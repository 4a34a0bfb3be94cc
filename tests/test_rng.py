"""rng.seed_state / rng.generator against NumPy's own SeedSequence and PCG64 (the oracle)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medmnistc_fast import _native, rng

# Entropies of 0..200 bits and spawn keys of 0..4 entries of 0..70 bits: one to seven entropy
# words, spawn keys of up to twelve words (SeedSequence pads the entropy to its pool first).
_ENTROPY = st.integers(0, 2**200)
_SPAWN = st.lists(st.integers(0, 2**70), max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(_ENTROPY, _SPAWN, st.integers(1, 9))
def test_seed_state_equals_numpy(entropy, spawn_key, n_words):
    want = np.random.SeedSequence(entropy, spawn_key=spawn_key).generate_state(n_words, np.uint64)
    got = rng.seed_state(entropy, spawn_key, n_words)
    assert got.dtype == np.uint64 and got.shape == (n_words,)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("key", [0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15])
def test_generator_equals_pcg64_of_key(key):
    ours, numpys = rng.generator(key), np.random.Generator(np.random.PCG64(key))
    assert ours.bit_generator.state == numpys.bit_generator.state
    assert np.array_equal(ours.random(7), numpys.random(7))
    assert np.array_equal(ours.integers(0, 1000, 5), numpys.integers(0, 1000, 5))


@pytest.mark.parametrize("n_words", [1, 2, 3, 8])
def test_key_seed_uint32_words(n_words):
    want = np.random.SeedSequence(2**40 + 3).generate_state(n_words, np.uint32)
    got = rng._KeySeed(2**40 + 3).generate_state(n_words, np.uint32)
    assert got.dtype == np.uint32 and np.array_equal(got, want)
    with pytest.raises(ValueError, match="uint32 or uint64"):
        rng._KeySeed(1).generate_state(2, np.float64)


def test_native_words_in_use_and_key_from_seed():
    rng.seed_state(5)
    assert rng._NATIVE_OK is True  # this NumPy's SeedSequence is the algorithm of seed.cpp
    want = np.random.SeedSequence(12345).generate_state(1, np.uint64)[0]
    assert rng.key_from_seed(12345) == int(want)


def test_falls_back_to_numpy_when_the_native_words_differ(monkeypatch):
    # A NumPy whose SeedSequence changed would fail the first-use check: NumPy's words are used.
    monkeypatch.setattr(rng, "_NATIVE_OK", None)
    monkeypatch.setattr(_native, "seed_sequence_state",
                        lambda words, n: np.zeros(n, np.uint64))
    want = np.random.SeedSequence(77).generate_state(3, np.uint64)
    assert np.array_equal(rng.seed_state(77, (), 3), want)
    assert rng._NATIVE_OK is False
    assert rng.generator(77).bit_generator.state == np.random.PCG64(77).state


def test_native_rejects_bad_arguments():
    with pytest.raises(ValueError, match="no entropy words"):
        _native.seed_sequence_state([], 1)
    with pytest.raises(ValueError, match="n64 must be in"):
        _native.seed_sequence_state([1], 0)


def test_negative_seeds_raise_like_numpy():
    # NumPy's SeedSequence refuses negative entropy and spawn-key entries; the native path used
    # to loop forever splitting -1 into 32-bit words (base_key(-1, ...) exhausted memory).
    for entropy, spawn in ((-1, ()), (1, (3, -2))):
        with pytest.raises(ValueError, match="expected non-negative"):
            np.random.SeedSequence(entropy, spawn_key=spawn)
        with pytest.raises(ValueError, match="entropy and spawn_key entries must be non-negative"):
            rng.seed_state(entropy, spawn)
    with pytest.raises(ValueError, match="seed must be a non-negative int; got -1"):
        rng.base_key(-1, "pathmnist", "pixelate", 1)
    with pytest.raises(ValueError, match="must be non-negative"):
        rng.key_from_seed(-5)


def test_image_keys_refuse_negative_and_non_integer_indices():
    # image_key(base, -1) wrapped silently and image_keys(base, -1) raised NumPy's OverflowError.
    base = rng.base_key(7, "pathmnist", "pixelate", 2)
    want = rng.image_keys(base, np.arange(4, dtype=np.uint64))
    np.testing.assert_array_equal(rng.image_keys(base, [0, 1, 2, 3]), want)
    assert [rng.image_key(base, i) for i in range(4)] == [int(k) for k in want]
    for bad in (-1, [3, -2], np.array([-5])):
        with pytest.raises(ValueError, match="indices must be >= 0"):
            rng.image_keys(base, bad)
    for bad in ([1.5], 2 ** 64):
        with pytest.raises(TypeError, match="indices must be integers"):
            rng.image_keys(base, bad)
    for bad in (-1, 2 ** 64):
        with pytest.raises(ValueError, match=r"index must be in 0\.\.2\*\*64 - 1"):
            rng.image_key(base, bad)
