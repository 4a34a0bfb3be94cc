// Shared helpers for the C++ kernels of medmnistc_fast._native.
//
// Conventions of every kernel: images are C-contiguous uint8 arrays of shape (H, W, C) with
// H, W, C >= 1; the kernel returns a freshly allocated (H, W, C) uint8 array and releases the GIL
// around the computation. Only shapes are checked here (std::invalid_argument, which pybind11
// turns into ValueError); argument values are validated by the Python layer.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

// Hot loops are compiled twice, for AVX2 and for the baseline ISA, and the loader picks one at run
// time (GCC function multi-versioning, ELF ifunc). The wheel therefore stays portable without
// -march=native. The "avx2" target does not enable FMA, so both clones round identically.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define MMC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MMC_CLONES
#endif


// Hand-written AVX-512 paths (lut.cpp, noise.cpp, resample.cpp) all target one level: F, BW, DQ,
// VL and VBMI (Intel Ice Lake, AMD Zen 4 and later), chosen at run time by cpu_has_avx512(); every
// such path has a portable twin that gives the same bytes.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(MMC_NO_SIMD)
#define MMC_HAVE_AVX512 1
#define MMC_AVX512 \
    __attribute__((target("avx2,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi")))
// GCC 12's AVX-512 headers trip these on their own _mm512_undefined_* placeholders.
// Compiler-vectorised float loops for the same level, with 512-bit vectors preferred. Each element
// keeps its order of operations and -ffp-contract=off forbids fused multiply-adds, so these round
// exactly like the portable clones.
#define MMC_AVX512_WIDE \
    __attribute__((target("avx2,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,prefer-vector-width=512")))
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace mmc {

namespace py = pybind11;

#ifdef MMC_HAVE_AVX512
inline bool cpu_has_avx512() {
    static const bool ok = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vbmi");
    }();
    return ok;
}
#endif

using ImageIn = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;
using ImageOut = py::array_t<std::uint8_t>;

struct Shape {
    std::ptrdiff_t h, w, c;
    std::ptrdiff_t row() const { return w * c; }  // elements per image row
    std::ptrdiff_t size() const { return h * w * c; }
};

// Shape of an (H, W, C) image, with H, W, C >= 1; `fn` names the kernel in the error message.
inline Shape image_shape(const ImageIn& image, const char* fn) {
    if (image.ndim() != 3) {
        throw std::invalid_argument(std::string(fn) + ": image must have shape (H, W, C), got " +
                                    std::to_string(image.ndim()) + " dimensions");
    }
    const Shape s{image.shape(0), image.shape(1), image.shape(2)};
    if (s.h < 1 || s.w < 1 || s.c < 1) {
        throw std::invalid_argument(std::string(fn) + ": image dimensions must all be >= 1");
    }
    return s;
}

inline ImageOut new_image(const Shape& s) { return ImageOut({s.h, s.w, s.c}); }

// Where a kernel with an `out` argument writes: a new (H, W, C) array when `out` is None, else
// `out` itself, which must be a writeable, C-contiguous uint8 array of the image's shape and
// share no memory with `image` (std::invalid_argument otherwise): such kernels do not promise
// to read every input element before writing over it.
inline ImageOut output_image(const Shape& s, const py::object& out, const char* fn,
                             const ImageIn& image) {
    if (out.is_none()) return new_image(s);
    if (!ImageOut::check_(out)) {
        throw std::invalid_argument(std::string(fn) + ": out must be a uint8 ndarray");
    }
    auto arr = py::reinterpret_borrow<ImageOut>(out);
    if (arr.ndim() != 3 || arr.shape(0) != s.h || arr.shape(1) != s.w || arr.shape(2) != s.c) {
        throw std::invalid_argument(std::string(fn) + ": out must have the image's shape");
    }
    if (!(arr.flags() & py::array::c_style) || !arr.writeable()) {
        throw std::invalid_argument(std::string(fn) + ": out must be C-contiguous and writeable");
    }
    // Both are C-contiguous runs of s.size() bytes: any shared byte means overlapping runs (a
    // partial overlap would read samples already written).
    const std::uint8_t* src = image.data();
    const std::uint8_t* dst = arr.data();
    const auto n = static_cast<std::size_t>(s.size());
    if (n > 0 && std::less<const std::uint8_t*>()(dst, src + n) &&
        std::less<const std::uint8_t*>()(src, dst + n)) {
        throw std::invalid_argument(std::string(fn) + ": out must not share memory with image");
    }
    return arr;
}

// Index into [0, n) with the edge sample repeated (ImageMagick "edge" virtual pixels).
inline std::ptrdiff_t clamp_index(std::ptrdiff_t i, std::ptrdiff_t n) {
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// Index into [0, n) mirrored about the edge samples without repeating them: ...cb|abcd|cb...
// This is OpenCV BORDER_REFLECT_101 and PyTorch/NumPy "reflect". Offsets farther than n - 1 keep
// reflecting (period 2(n - 1)), as OpenCV's borderInterpolate does; n == 1 maps everything to 0.
inline std::ptrdiff_t reflect101_index(std::ptrdiff_t i, std::ptrdiff_t n) {
    if (n == 1) return 0;
    const std::ptrdiff_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

// Row `src` (w pixels of c channels) extended by `pad` pixels on each side with reflect-101,
// converted to T, into out[(w + 2 * pad) * c].
template <class T>
void pad_row_reflect101(const std::uint8_t* src, std::ptrdiff_t w, std::ptrdiff_t c,
                        std::ptrdiff_t pad, T* out) {
    auto copy_pixel = [&](std::ptrdiff_t xp) {
        const std::uint8_t* px = src + reflect101_index(xp - pad, w) * c;
        for (std::ptrdiff_t ch = 0; ch < c; ++ch) out[xp * c + ch] = static_cast<T>(px[ch]);
    };
    for (std::ptrdiff_t xp = 0; xp < pad; ++xp) copy_pixel(xp);
    T* mid = out + pad * c;
    for (std::ptrdiff_t i = 0; i < w * c; ++i) mid[i] = static_cast<T>(src[i]);
    for (std::ptrdiff_t xp = pad + w; xp < w + 2 * pad; ++xp) copy_pixel(xp);
}

}  // namespace mmc
