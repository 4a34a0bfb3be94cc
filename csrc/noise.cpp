// Alias-method sampling of the noise corruptions' exact output laws (see corruptions/noise.py).
//
// Every array element with value v is replaced by a draw from row v of a 256 x 256 law, using
// Walker's alias method: 32 random bits per element, the top 8 pick a column `col`, the low 24
// are a uniform compared with that column's acceptance threshold; accepted -> col, else the
// column's alias. The table arrives packed, one uint32 per (v, col):
//     entry = (threshold' << 8) | alias'
// where threshold' = min(threshold, 2^24 - 1) and, when the threshold is 2^24 (always accept),
// alias' = col, so the 2^-24 case "low 24 bits == 2^24 - 1" still yields col. (Packing is done
// in Python: noise.packed_alias_table.)
//
// Random stream: element j uses splitmix64(key + (j / 2 + 1) * 0x9E3779B97F4A7C15) (Steele,
// Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the constants are
// SplitMix64's), its high 32 bits for even j and its low 32 bits for odd j.
//
// The AVX-512 path (F + DQ for 64-bit multiplies, BW for byte packing) computes 8 SplitMix64
// numbers = 16 elements per step and gathers the 16 table entries; the portable loop gives the
// same bytes (integer arithmetic only).
#include "noise.hpp"

#include "kernel_common.hpp"

#include <atomic>


namespace mmc {

namespace {

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kMix1 = 0xBF58476D1CE4E5B9ULL;
constexpr std::uint64_t kMix2 = 0x94D049BB133111EBULL;

inline std::uint64_t splitmix64(std::uint64_t key, std::uint64_t i) {
    std::uint64_t z = key + (i + 1) * kGamma;
    z = (z ^ (z >> 30)) * kMix1;
    z = (z ^ (z >> 27)) * kMix2;
    return z ^ (z >> 31);
}

inline std::uint8_t alias_draw(const std::uint32_t* table, std::uint8_t v, std::uint32_t r32) {
    const std::uint32_t col = r32 >> 24;
    const std::uint32_t e = table[(static_cast<std::uint32_t>(v) << 8) | col];
    return static_cast<std::uint8_t>((r32 & 0xFFFFFFu) < (e >> 8) ? col : (e & 0xFFu));
}

// Elements [first, n) of the flat image, first even.
void alias_scalar(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t first,
                  std::ptrdiff_t n, const std::uint32_t* table, std::uint64_t key) {
    std::ptrdiff_t j = first;
    for (; j + 2 <= n; j += 2) {
        const std::uint64_t r = splitmix64(key, static_cast<std::uint64_t>(j / 2));
        dst[j] = alias_draw(table, src[j], static_cast<std::uint32_t>(r >> 32));
        dst[j + 1] = alias_draw(table, src[j + 1], static_cast<std::uint32_t>(r));
    }
    if (j < n) {
        const std::uint64_t r = splitmix64(key, static_cast<std::uint64_t>(j / 2));
        dst[j] = alias_draw(table, src[j], static_cast<std::uint32_t>(r >> 32));
    }
}

#ifdef MMC_HAVE_AVX512

MMC_AVX512 void alias_avx512(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n,
                                   const std::uint32_t* table, std::uint64_t key) {
    const __m512i mix1 = _mm512_set1_epi64(static_cast<long long>(kMix1));
    const __m512i mix2 = _mm512_set1_epi64(static_cast<long long>(kMix2));
    const __m512i step = _mm512_set1_epi64(static_cast<long long>(8 * kGamma));
    const __m512i low24 = _mm512_set1_epi32(0xFFFFFF);
    const __m512i low8 = _mm512_set1_epi32(0xFF);
    // z for SplitMix64 numbers 0..7: key + (i + 1) * gamma.
    __m512i z0 = _mm512_set_epi64(
        static_cast<long long>(key + 8 * kGamma), static_cast<long long>(key + 7 * kGamma),
        static_cast<long long>(key + 6 * kGamma), static_cast<long long>(key + 5 * kGamma),
        static_cast<long long>(key + 4 * kGamma), static_cast<long long>(key + 3 * kGamma),
        static_cast<long long>(key + 2 * kGamma), static_cast<long long>(key + 1 * kGamma));
    std::ptrdiff_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i z = z0;
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), mix1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), mix2);
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
        z0 = _mm512_add_epi64(z0, step);
        // 32-bit lane 2m holds the low half of number m: swap halves so that element 2m gets the
        // high half and 2m + 1 the low half.
        const __m512i r32 = _mm512_shuffle_epi32(z, _MM_PERM_CDAB);
        const __m512i col = _mm512_srli_epi32(r32, 24);
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(src + j)));
        const __m512i idx = _mm512_or_si512(_mm512_slli_epi32(v, 8), col);
        const __m512i e = _mm512_i32gather_epi32(idx, table, 4);
        const __mmask16 keep =
            _mm512_cmplt_epu32_mask(_mm512_and_si512(r32, low24), _mm512_srli_epi32(e, 8));
        const __m512i out = _mm512_mask_blend_epi32(keep, _mm512_and_si512(e, low8), col);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), _mm512_cvtepi32_epi8(out));
    }
    alias_scalar(src, dst, j, n, table, key);
}

#endif

// Reads one word of every 64-byte line of the 256 KB table, front to back, before sampling.
// The sampler reads the table at random (row = element value, column = random bits), and in a
// data loader, where each call draws another corruption and parameter, the table is usually
// not in any cache: a 224 x 224 image touches nearly every line, one miss at a time in random
// order. Read in order first, the hardware prefetcher streams it. Measured on gray 224 x 224
// images in such a workload (chestmnist's augmentation): a cold call took 69 us, 41 us with
// this pass; a warm call 28 us either way. The same loop with a single accumulator gained
// only 5 us (its code was not examined); four independent ones are what was measured here.
// Done for images of at least half as many elements as the table has entries, and only when
// the table differs from the previous call's on this thread: a run over many images with one
// table (generate) keeps it warm, and the pass would cost it about 2 us per call.
std::uint32_t table_read_pass(const std::uint32_t* table) {
    std::uint32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
    for (std::size_t i = 0; i < 256 * 256; i += 64) {
        acc0 |= table[i];
        acc1 |= table[i + 16];
        acc2 |= table[i + 32];
        acc3 |= table[i + 48];
    }
    return acc0 | acc1 | acc2 | acc3;
}

std::atomic<std::uint32_t> g_table_sink{0};
thread_local const std::uint32_t* t_last_table = nullptr;

using Table = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>;

ImageOut alias_sample(const ImageIn& image, const Table& table, std::uint64_t key, bool portable,
                      const py::object& out_arg) {
    const Shape s = image_shape(image, "alias_sample");
    if (table.ndim() != 2 || table.shape(0) != 256 || table.shape(1) != 256) {
        throw std::invalid_argument("alias_sample: table must have shape (256, 256)");
    }
    ImageOut out = output_image(s, out_arg, "alias_sample", image);
    const std::uint8_t* src = image.data();
    std::uint8_t* dst = out.mutable_data();
    const std::uint32_t* t = table.data();
    {
        py::gil_scoped_release release;
        if (s.size() >= 256 * 256 / 2 && t != t_last_table) {
            g_table_sink.store(table_read_pass(t), std::memory_order_relaxed);
        }
        t_last_table = t;
#ifdef MMC_HAVE_AVX512
        if (!portable && cpu_has_avx512()) {
            alias_avx512(src, dst, s.size(), t, key);
        } else {
            alias_scalar(src, dst, 0, s.size(), t, key);
        }
#else
        alias_scalar(src, dst, 0, s.size(), t, key);
#endif
    }
    return out;
}

}  // namespace

void register_noise(py::module_& m) {
    m.def("alias_sample", &alias_sample, py::arg("image"), py::arg("table"), py::arg("key"),
          py::arg("portable") = false, py::arg("out") = py::none(),
          "Each element of a uint8 (H, W, C) image replaced by an alias-method draw from its "
          "row of a packed uint32 (256, 256) table, with the SplitMix64 counter stream of "
          "`key`; a new array, or `out` when given. portable=True forces the plain loop (tests "
          "compare both paths).");
}

}  // namespace mmc
