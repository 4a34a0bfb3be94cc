// Per-byte lookup tables (brightness, contrast, gamma): out[i] = lut[in[i]].
//
// The colour corruptions of MedMNIST-C act on each byte alone (Pillow's ImageEnhance blends and
// torchvision's PIL gamma), so medmnistc_fast turns each into a 256-entry table built by Pillow
// itself (corruptions/color.py) and applies it here. Where the CPU has AVX-512 VBMI the table is
// held in four 64-byte registers and 64 bytes are translated by two VPERMI2B and one blend; the
// portable path is a plain gather. Both give the same bytes (a table lookup has no rounding).
#include "lut.hpp"

#include <cmath>
#include <cstring>

#include "kernel_common.hpp"


namespace mmc {

namespace {

void lut_scalar(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n,
                const std::uint8_t* lut) {
    for (std::ptrdiff_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
}

#ifdef MMC_HAVE_AVX512

// 64 bytes through the table held in t0..t3: VPERMI2B uses the low 7 bits of each index and the
// index's top bit picks the table half.
MMC_AVX512 inline __m512i translate64(__m512i x, __m512i t0, __m512i t1, __m512i t2, __m512i t3) {
    const __m512i low = _mm512_permutex2var_epi8(t0, x, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, x, t3);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), low, high);
}

MMC_AVX512 void lut_vbmi(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n,
                       const std::uint8_t* lut) {
    const __m512i t0 = _mm512_loadu_si512(lut);
    const __m512i t1 = _mm512_loadu_si512(lut + 64);
    const __m512i t2 = _mm512_loadu_si512(lut + 128);
    const __m512i t3 = _mm512_loadu_si512(lut + 192);
    std::ptrdiff_t i = 0;
    for (; i + 64 <= n; i += 64) {
        _mm512_storeu_si512(dst + i, translate64(_mm512_loadu_si512(src + i), t0, t1, t2, t3));
    }
    if (i < n) {
        const __mmask64 m = _bzhi_u64(~0ULL, static_cast<unsigned>(n - i));
        const __m512i x = _mm512_maskz_loadu_epi8(m, src + i);
        _mm512_mask_storeu_epi8(dst + i, m, translate64(x, t0, t1, t2, t3));
    }
}

#endif

void lut_any(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t n, const std::uint8_t* lut) {
#ifdef MMC_HAVE_AVX512
    if (cpu_has_avx512()) {
        lut_vbmi(src, dst, n, lut);
        return;
    }
#endif
    lut_scalar(src, dst, n, lut);
}

ImageOut apply_lut(const ImageIn& image, const ImageIn& lut, bool portable) {
    const Shape s = image_shape(image, "apply_lut");
    if (lut.ndim() != 1 || lut.shape(0) != 256) {
        throw std::invalid_argument("apply_lut: lut must have shape (256,)");
    }
    ImageOut out = new_image(s);
    const std::uint8_t* src = image.data();
    std::uint8_t* dst = out.mutable_data();
    std::uint8_t table[256];
    std::memcpy(table, lut.data(), 256);
    {
        py::gil_scoped_release release;
        if (portable) {
            lut_scalar(src, dst, s.size(), table);
        } else {
            lut_any(src, dst, s.size(), table);
        }
    }
    return out;
}

// Sum over pixels of Pillow's luma L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16 (Pillow's
// RGB -> L conversion, libImaging/Convert.c); for one channel the values themselves.
std::int64_t luma_sum_scalar(const std::uint8_t* src, std::ptrdiff_t n_px, std::ptrdiff_t c) {
    std::int64_t total = 0;
    if (c == 1) {
        for (std::ptrdiff_t i = 0; i < n_px; ++i) total += src[i];
        return total;
    }
    for (std::ptrdiff_t p = 0; p < n_px; ++p) {
        const std::uint32_t r = src[3 * p], g = src[3 * p + 1], b = src[3 * p + 2];
        total += (19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16;
    }
    return total;
}

#ifdef MMC_HAVE_AVX512
// 16 RGB pixels (48 bytes) per step: VPERMB spreads channel k of pixel i to byte 4 i of its own
// vector (zeros elsewhere), so each channel becomes 16 uint32 lanes; the luma is exact in 32 bits.
MMC_AVX512 std::int64_t luma_sum_rgb_vbmi(const std::uint8_t* src, std::ptrdiff_t n_px) {
    alignas(64) std::uint8_t idx[3][64];
    for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < 64; ++i) idx[k][i] = static_cast<std::uint8_t>(i % 4 == 0 ? 3 * (i / 4) + k : 0);
    }
    const __m512i ir = _mm512_load_si512(idx[0]), ig = _mm512_load_si512(idx[1]),
                  ib = _mm512_load_si512(idx[2]);
    const __mmask64 lane0 = 0x1111111111111111ULL;  // byte 0 of every 32-bit lane
    const __m512i wr = _mm512_set1_epi32(19595), wg = _mm512_set1_epi32(38470),
                  wb = _mm512_set1_epi32(7471), half = _mm512_set1_epi32(0x8000);
    __m512i acc = _mm512_setzero_si512();  // 16 lanes of at most 255 per step
    std::int64_t total = 0;
    std::ptrdiff_t p = 0, steps = 0;
    for (; p + 16 <= n_px; p += 16) {
        const __m512i x = _mm512_maskz_loadu_epi8(0xFFFFFFFFFFFFULL, src + 3 * p);
        const __m512i r = _mm512_maskz_permutexvar_epi8(lane0, ir, x);
        const __m512i g = _mm512_maskz_permutexvar_epi8(lane0, ig, x);
        const __m512i b = _mm512_maskz_permutexvar_epi8(lane0, ib, x);
        __m512i l = _mm512_add_epi32(_mm512_mullo_epi32(r, wr), _mm512_mullo_epi32(g, wg));
        l = _mm512_add_epi32(l, _mm512_add_epi32(_mm512_mullo_epi32(b, wb), half));
        acc = _mm512_add_epi32(acc, _mm512_srli_epi32(l, 16));
        if (++steps == (1 << 20)) {  // 2^20 * 255 < 2^31: flush before a lane could overflow
            total += _mm512_reduce_add_epi32(acc);
            acc = _mm512_setzero_si512();
            steps = 0;
        }
    }
    total += _mm512_reduce_add_epi32(acc);
    return total + luma_sum_scalar(src + 3 * p, n_px - p, 3);
}

// Byte sum, 64 bytes per step (VPSADBW against zero gives eight 64-bit partial sums).
MMC_AVX512 std::int64_t byte_sum_avx512(const std::uint8_t* src, std::ptrdiff_t n) {
    __m512i acc = _mm512_setzero_si512();
    std::ptrdiff_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_loadu_si512(src + i),
                                                    _mm512_setzero_si512()));
    }
    return _mm512_reduce_add_epi64(acc) + luma_sum_scalar(src + i, n - i, 1);
}
#endif

std::int64_t luma_sum(const ImageIn& image, bool portable) {
    const Shape s = image_shape(image, "luma_sum");
    if (s.c != 1 && s.c != 3) throw std::invalid_argument("luma_sum: image must have 1 or 3 channels");
    const std::uint8_t* src = image.data();
    py::gil_scoped_release release;
#ifdef MMC_HAVE_AVX512
    if (!portable && cpu_has_avx512()) {
        return s.c == 3 ? luma_sum_rgb_vbmi(src, s.h * s.w) : byte_sum_avx512(src, s.h * s.w);
    }
#endif
    return luma_sum_scalar(src, s.h * s.w, s.c);
}


// ---------------------------------------------------------------------------------------------
// Tables built here (augmentation draws a new factor per call, so building the 256 entries in
// Python dominated the colour corruptions). Same arithmetic as corruptions/color.py, which stays
// the documented definition; tests/test_lut.py checks the two agree entry for entry.

// Pillow Image.blend of a constant `base` with every byte v, factor alpha (libImaging/Blend.c):
// float32 base + alpha * (v - base), clipped to [0, 255] when alpha is outside [0, 1], truncated.
void blend_table(int base, double factor, std::uint8_t* lut) {
    const float a = static_cast<float>(factor);
    const float b = static_cast<float>(base);
    const bool clip = !(0.0f <= a && a <= 1.0f);
    for (int v = 0; v < 256; ++v) {
        float t = b + a * (static_cast<float>(v) - b);
        // NaN (an infinite float32 factor times v - base = 0) goes to 0, not to an undefined cast.
        if (clip) t = t >= 0.0f ? (t > 255.0f ? 255.0f : t) : 0.0f;
        lut[v] = static_cast<std::uint8_t>(t);
    }
}

// torchvision's PIL adjust_gamma (gain 1): int((255 + 1 - 1e-3) * (v / 255) ** gamma), with C pow
// as Python's float ** calls it.
void gamma_table(double gamma, std::uint8_t* lut) {
    const double gain = 255 + 1 - 1e-3;
    for (int v = 0; v < 256; ++v) {
        const double x = static_cast<double>(v) / 255.0;
        lut[v] = static_cast<std::uint8_t>(static_cast<std::int64_t>(gain * std::pow(x, gamma)));
    }
}

// The argument ranges the tables are defined on (std::invalid_argument otherwise): a base outside
// 0..255 (with a factor in [0, 1], where no clip applies) or a negative or NaN gamma (pow(0, g)
// infinite, or NaN) would send values outside the integer types to the truncating casts above,
// which is undefined behaviour. The Python layer passes none of them (found by an ASan/UBSan
// fuzz: blend_lut(-1000, 0.5) and gamma_lut(-1.0) reached the casts).
int checked_base(int base, const char* fn) {
    if (base < 0 || base > 255) {
        throw std::invalid_argument(std::string(fn) + ": base must be in 0..255, got " +
                                    std::to_string(base));
    }
    return base;
}

double checked_gamma(double g, const char* fn) {
    if (!(g >= 0.0)) {
        throw std::invalid_argument(std::string(fn) + ": gamma must be >= 0 (and not NaN)");
    }
    return g;
}

py::array_t<std::uint8_t> table_array(const std::uint8_t* lut) {
    py::array_t<std::uint8_t> out(256);
    std::memcpy(out.mutable_data(), lut, 256);
    return out;
}

// `make(table)` fills the 256-entry table, then it is applied to every byte, into `out_arg` when
// given; both under one GIL release (gamma's table is 256 pow calls, about 2 us, which held the
// GIL per image when it was built before the release).
template <class MakeTable>
ImageOut apply_table(const ImageIn& image, MakeTable make, const char* fn,
                     const py::object& out_arg) {
    const Shape s = image_shape(image, fn);
    ImageOut out = output_image(s, out_arg, fn, image);
    const std::uint8_t* src = image.data();
    std::uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        std::uint8_t table[256];
        make(table);
        lut_any(src, dst, s.size(), table);
    }
    return out;
}

std::int64_t luma_sum_any(const std::uint8_t* src, std::ptrdiff_t n_px, std::ptrdiff_t c) {
#ifdef MMC_HAVE_AVX512
    if (cpu_has_avx512()) {
        return c == 3 ? luma_sum_rgb_vbmi(src, n_px) : byte_sum_avx512(src, n_px);
    }
#endif
    return luma_sum_scalar(src, n_px, c);
}

ImageOut brightness(const ImageIn& image, double factor, const py::object& out) {
    return apply_table(image, [factor](std::uint8_t* t) { blend_table(0, factor, t); },
                       "brightness", out);
}

// Pillow ImageEnhance.Contrast: blend with the constant int(mean(L) + 0.5) (mean in double, as
// corruptions/color.mean_luma computes it from the exact integer sum). The sum is taken in the
// table's GIL release too (two releases, with the table built in between, handed the GIL to
// another thread twice per image).
ImageOut contrast(const ImageIn& image, double factor, const py::object& out) {
    const Shape s = image_shape(image, "contrast");
    if (s.c != 1 && s.c != 3) throw std::invalid_argument("contrast: image must have 1 or 3 channels");
    const std::uint8_t* src = image.data();
    return apply_table(image, [src, s, factor](std::uint8_t* t) {
        const std::int64_t total = luma_sum_any(src, s.h * s.w, s.c);
        const double mean = static_cast<double>(total) / static_cast<double>(s.h * s.w);
        blend_table(static_cast<int>(mean + 0.5), factor, t);
    }, "contrast", out);
}

ImageOut gamma(const ImageIn& image, double g, const py::object& out) {
    checked_gamma(g, "gamma");
    return apply_table(image, [g](std::uint8_t* t) { gamma_table(g, t); }, "gamma", out);
}

}  // namespace

void register_lut(py::module_& m) {
    m.def("apply_lut", &apply_lut, py::arg("image"), py::arg("lut"), py::arg("portable") = false,
          "out[y, x, c] = lut[image[y, x, c]] for a uint8 (H, W, C) image and a uint8 (256,) "
          "table; new array. portable=True forces the plain loop (tests compare both paths).");
    m.def("luma_sum", &luma_sum, py::arg("image"), py::arg("portable") = false,
          "Sum over pixels of Pillow's integer luma of a uint8 (H, W, 1 or 3) image.");
    m.def("blend_lut", [](int base, double factor) {
              std::uint8_t t[256];
              blend_table(checked_base(base, "blend_lut"), factor, t);
              return table_array(t);
          }, py::arg("base"), py::arg("factor"),
          "uint8 (256,) table of Pillow's blend of the constant `base` with each byte.");
    m.def("gamma_lut", [](double g) {
              std::uint8_t t[256];
              gamma_table(checked_gamma(g, "gamma_lut"), t);
              return table_array(t);
          }, py::arg("gamma"), "uint8 (256,) table of torchvision's PIL adjust_gamma (gain 1).");
    m.def("brightness", &brightness, py::arg("image"), py::arg("factor"),
          py::arg("out") = py::none(),
          "apply_lut(image, blend_lut(0, factor)) in one call; into `out` when given.");
    m.def("contrast", &contrast, py::arg("image"), py::arg("factor"), py::arg("out") = py::none(),
          "apply_lut(image, blend_lut(int(luma_sum(image) / (H * W) + 0.5), factor)) in one call; "
          "into `out` when given.");
    m.def("gamma", &gamma, py::arg("image"), py::arg("gamma"), py::arg("out") = py::none(),
          "apply_lut(image, gamma_lut(gamma)) in one call; into `out` when given.");
}

}  // namespace mmc
