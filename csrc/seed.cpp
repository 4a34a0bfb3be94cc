// The entropy hash of NumPy's SeedSequence, for building many small generators quickly.
//
// numpy.random.SeedSequence(entropy, spawn_key).generate_state(n, uint64) costs about 7 us per
// call in Python, and medmnistc_fast builds one PCG64 generator per image for its scalar draws.
// This file computes the same words natively; rng.py hands them to numpy.random.PCG64 through
// an ISeedSequence, so the generator's seeding itself stays NumPy's.
//
// The algorithm is the one NumPy documents for SeedSequence (numpy/random/bit_generator.pyx,
// after M. E. O'Neill's seed_seq_fe, "randutils", 2015): a pool of 4 uint32 words, each entropy
// word hashed into it with hashmix (multiplier updated per use), the pool words mixed pairwise,
// extra entropy words mixed into every pool word, and output words drawn from the pool cycle
// with a second hash. Constants (from that algorithm): INIT_A 0x43b0d7e5, MULT_A 0x931e8875,
// INIT_B 0x8b51f9dd, MULT_B 0x58f38ded, MIX_MULT_L 0xca01f9dd, MIX_MULT_R 0x4973f715, XSHIFT 16.
// tests/test_rng.py compares the words with NumPy's for many entropies and spawn keys.
#include "seed.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

namespace mmc {

namespace {

constexpr std::uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u;
constexpr std::uint32_t kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
constexpr std::uint32_t kMixL = 0xca01f9ddu, kMixR = 0x4973f715u;
constexpr unsigned kXShift = 16;
constexpr std::size_t kPool = 4;

// hashmix: the hash constant advances on every use (uint32 wrapping arithmetic throughout).
inline std::uint32_t hashmix(std::uint32_t value, std::uint32_t& hash_const) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    return value ^ (value >> kXShift);
}

inline std::uint32_t mix(std::uint32_t x, std::uint32_t y) {
    const std::uint32_t r = kMixL * x - kMixR * y;
    return r ^ (r >> kXShift);
}

// generate_state(n64, uint64) of a SeedSequence whose assembled entropy words are `words` (the
// entropy's words, zero-padded to the pool size when a spawn key follows, then the spawn key's
// words; assembled by the caller).
py::array_t<std::uint64_t> seed_sequence_state(const std::vector<std::uint32_t>& words,
                                               ptrdiff_t n64) {
    if (words.empty()) throw std::invalid_argument("seed_sequence_state: no entropy words");
    if (n64 < 1 || n64 > (1 << 20)) {
        throw std::invalid_argument("seed_sequence_state: n64 must be in 1..2^20");
    }
    std::uint32_t pool[kPool];
    std::uint32_t hc = kInitA;
    for (std::size_t i = 0; i < kPool; ++i) pool[i] = hashmix(i < words.size() ? words[i] : 0u, hc);
    for (std::size_t src = 0; src < kPool; ++src) {
        for (std::size_t dst = 0; dst < kPool; ++dst) {
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hc));
        }
    }
    for (std::size_t src = kPool; src < words.size(); ++src) {
        for (std::size_t dst = 0; dst < kPool; ++dst) {
            pool[dst] = mix(pool[dst], hashmix(words[src], hc));
        }
    }
    std::vector<std::uint32_t> out32(static_cast<std::size_t>(2 * n64));
    std::uint32_t hb = kInitB;
    for (std::size_t i = 0; i < out32.size(); ++i) {
        std::uint32_t v = pool[i % kPool] ^ hb;
        hb *= kMultB;
        v *= hb;
        out32[i] = v ^ (v >> kXShift);
    }
    // Pairs of uint32 words in memory order, read as uint64 (NumPy's .view(np.uint64)).
    py::array_t<std::uint64_t> out(n64);
    std::memcpy(out.mutable_data(), out32.data(), out32.size() * sizeof(std::uint32_t));
    return out;
}

}  // namespace

void register_seed(py::module_& m) {
    m.def("seed_sequence_state", &seed_sequence_state, py::arg("words"), py::arg("n64"),
          "numpy.random.SeedSequence's generate_state(n64, uint64) from its assembled uint32 "
          "entropy words (see _native.pyi).");
}

}  // namespace mmc
