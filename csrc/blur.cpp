// Blur kernels of medmnistc_fast: motion, zoom, defocus (2-D filter) and Gaussian blur.
//
// Each kernel reproduces the arithmetic of the MedMNIST-C reference (medmnistc 0.1.0,
// corruptions/filter.py) and of the libraries it calls (ImageMagick 6 Q16, scipy.ndimage.zoom,
// OpenCV filter2D, torchvision gaussian_blur), implemented here from the documented arithmetic and
// verified numerically against the real reference. Sources of constants are given where they
// appear.
#include "blur.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "kernel_common.hpp"

// a*b+c must stay two roundings (no FMA contraction) for the bit-exact paths (motion blur, zoom
// blur, filter2d). GCC contracts only when FMA instructions are enabled (the disk filter's
// x86-64-v4 variant enables them); setup.py compiles with -ffp-contract=off, which every build
// of these files needs.
#ifdef __clang__
#pragma clang fp contract(off)
#endif

namespace mmc {
namespace {

using std::ptrdiff_t;
using std::uint8_t;

template <class T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Bound on sum|weights| accepted by the kernels (normalised blurs have 1). It keeps every
// accumulator far inside the int32 range used by the vectorised clamps before the uint8 store.
constexpr double kMaxGain = 1024.0;

double abs_sum(const double* v, ptrdiff_t n) {
    double total = 0.0;
    for (ptrdiff_t i = 0; i < n; ++i) total += std::fabs(v[i]);
    return total;
}

ptrdiff_t vector_length(const py::array& a, const char* fn, const char* name) {
    if (a.ndim() != 1) {
        throw std::invalid_argument(std::string(fn) + ": " + name + " must be one-dimensional");
    }
    return a.shape(0);
}

// ---------------------------------------------------------------------------------------------
// Motion blur: ImageMagick 6 MotionBlurImage as the reference runs it (Q16, non-HDRI build,
// PNG in and out).
//
// The image is read from an 8-bit PNG into 16-bit quanta (v * 257, ScaleCharToQuantum); each
// output sample is sum_k w_k * q(clamp(y + dy_k), clamp(x + dx_k)), accumulated in double in tap
// order, with "edge" virtual pixels; ClampToQuantum rounds it to a quantum (clamp, then +0.5 and
// truncate); the PNG encoder then writes the 8-bit sample as floor(q / 257). The last step was
// measured on ImageMagick 6.9.11-60 Q16 (Debian 12): its PNG writer truncates, whereas
// ScaleQuantumToChar (used e.g. by its BMP writer) would round.

constexpr double kQuantumPerChar = 257.0;  // 65535 / 255: ScaleCharToQuantum for Q16

// acc[i] += w * src[i]
MMC_CLONES void axpy(double* __restrict acc, const double* __restrict src, double w, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) acc[i] += w * src[i];
}

// acc[x * c + ch] += w * pixel[ch] for x in [0, n_px): the clamped (edge) part of a tap.
void add_pixel(double* acc, const double* pixel, double w, ptrdiff_t n_px, ptrdiff_t c) {
    for (ptrdiff_t x = 0; x < n_px; ++x) {
        for (ptrdiff_t ch = 0; ch < c; ++ch) acc[x * c + ch] += w * pixel[ch];
    }
}

// ClampToQuantum (v <= 0 -> 0, v >= 65535 -> 65535, else (Quantum)(v + 0.5)), then the PNG
// writer's 8-bit truncation floor(q / 257). The clamp is done on integers so that the loop
// vectorises; |acc| < 2^31 is guaranteed by the check on the weights in motion_blur().
MMC_CLONES void quantise_q16(const double* __restrict acc, uint8_t* __restrict out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) {
        std::int32_t q = static_cast<std::int32_t>(acc[i] + 0.5);
        q = q < 0 ? 0 : (q > 65535 ? 65535 : q);
        out[i] = static_cast<uint8_t>(q / 257);
    }
}

void motion_blur_impl(const uint8_t* src, uint8_t* dst, const Shape& s, const double* weights,
                      const std::int32_t* dx, const std::int32_t* dy, ptrdiff_t n_taps) {
    const ptrdiff_t row = s.row();
    std::vector<double> quanta(static_cast<std::size_t>(s.size()));
    for (ptrdiff_t i = 0; i < s.size(); ++i) quanta[i] = kQuantumPerChar * src[i];
    std::vector<double> acc(static_cast<std::size_t>(row));
    for (ptrdiff_t y = 0; y < s.h; ++y) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (ptrdiff_t k = 0; k < n_taps; ++k) {
            const double* srow = quanta.data() + clamp_index(y + dy[k], s.h) * row;
            const double w = weights[k];
            const ptrdiff_t d = dx[k];
            // Columns x with 0 <= x + d < W read inside the row; the others read an edge pixel.
            const ptrdiff_t x_lo = std::clamp<ptrdiff_t>(-d, 0, s.w);
            const ptrdiff_t x_hi = std::max(x_lo, std::min(s.w, s.w - d));
            add_pixel(acc.data(), srow, w, x_lo, s.c);
            // (no in-row part when |d| >= W: then x_lo + d lies outside the row, and so would the
            // pointer, even with nothing read)
            if (x_hi > x_lo) {
                axpy(acc.data() + x_lo * s.c, srow + (x_lo + d) * s.c, w, (x_hi - x_lo) * s.c);
            }
            add_pixel(acc.data() + x_hi * s.c, srow + (s.w - 1) * s.c, w, s.w - x_hi, s.c);
        }
        quantise_q16(acc.data(), dst + y * row, row);
    }
}

ImageOut motion_blur(const ImageIn& image, const Array<double>& weights,
                     const Array<std::int32_t>& dx, const Array<std::int32_t>& dy) {
    const char* fn = "motion_blur";
    const Shape s = image_shape(image, fn);
    const ptrdiff_t n = vector_length(weights, fn, "weights");
    if (n < 1 || vector_length(dx, fn, "dx") != n || vector_length(dy, fn, "dy") != n) {
        throw std::invalid_argument(
            "motion_blur: weights, dx and dy must have the same length >= 1");
    }
    if (!(abs_sum(weights.data(), n) <= kMaxGain)) {
        throw std::invalid_argument("motion_blur: sum(|weights|) must be finite and <= 1024");
    }
    ImageOut out = new_image(s);
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    const double* w = weights.data();
    const std::int32_t* px = dx.data();
    const std::int32_t* py_ = dy.data();
    {
        py::gil_scoped_release release;
        motion_blur_impl(src, dst, s, w, px, py_, n);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Zoom blur: the reference ZoomBlur.apply with clipped_zoom and scipy.ndimage.zoom(order=1).
//
// x = float32(v / 255); for each factor z, per axis of length n: crop c = ceil(n / z) samples
// starting at (n - c) // 2; scipy zooms them to round(c * z) samples (half to even), output sample
// o sitting at input position o * (c - 1) / (round(c * z) - 1) (grid_mode=False), linearly
// interpolated in double and stored as float32; positions past the last sample (which rounding
// can produce) give cval = 0 (mode='constant'); the centred n samples are kept, from
// (round(c * z) - n) // 2. Layers are summed in float32 in the given order and the result is
// float32((x + sum) / (m + 1)), clipped to [0, 1], times 255, truncated. The reference uses the
// height for both axes (square images only); here each axis uses its own length.
//
// The bilinear product is evaluated separably (rows first, in double), which rounds differently
// from scipy's four-term sum only below 1e-16 relative, before the float32 store.

struct ZoomTap {
    ptrdiff_t i0, i1;  // source samples (full-image coordinates)
    double w0, w1;     // linear weights (both 0 outside the input)
};

std::vector<ZoomTap> zoom_axis(ptrdiff_t n, double z) {
    const auto c = static_cast<ptrdiff_t>(std::ceil(static_cast<double>(n) / z));
    const ptrdiff_t top = (n - c) / 2;  // c <= n because z >= 1
    const auto n_out = static_cast<ptrdiff_t>(std::nearbyint(static_cast<double>(c) * z));
    const double scale =
        n_out > 1 ? static_cast<double>(c - 1) / static_cast<double>(n_out - 1) : 1.0;
    const ptrdiff_t trim = (n_out - n) / 2;  // n_out >= n because c * z >= n
    std::vector<ZoomTap> taps(static_cast<std::size_t>(n));
    for (ptrdiff_t y = 0; y < n; ++y) {
        const double pos = static_cast<double>(trim + y) * scale;
        if (pos > static_cast<double>(c - 1)) {
            taps[y] = {top, top, 0.0, 0.0};
            continue;
        }
        const double f = std::floor(pos);
        const auto i = static_cast<ptrdiff_t>(f);
        const double t = pos - f;
        taps[y] = {top + i, top + std::min(i + 1, c - 1), 1.0 - t, t};
    }
    return taps;
}

// One source row (as double) resampled along x: out[x*C + ch] = row(i0) * w0 + row(i1) * w1.
// CT > 0 fixes the channel count at compile time (1 and 3 are the common cases); CT = 0 reads c.
template <int CT>
void zoom_row(const double* srow, const ZoomTap* tx, ptrdiff_t w, ptrdiff_t c_runtime,
              double* out) {
    const ptrdiff_t c = CT > 0 ? CT : c_runtime;
    for (ptrdiff_t x = 0; x < w; ++x) {
        const ZoomTap& t = tx[x];
        const double* a = srow + t.i0 * c;
        const double* b = srow + t.i1 * c;
        for (ptrdiff_t ch = 0; ch < c; ++ch) out[x * c + ch] = a[ch] * t.w0 + b[ch] * t.w1;
    }
}

// acc[i] += float32(r0[i] * w0 + r1[i] * w1)
MMC_CLONES void zoom_accumulate(float* __restrict acc, const double* __restrict r0,
                                const double* __restrict r1, double w0, double w1, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) acc[i] += static_cast<float>(r0[i] * w0 + r1[i] * w1);
}

// out = trunc(clip((x + acc) / layers, 0, 1) * 255) in float32. Every layer lies in [0, 1], so the
// clip only meets rounding excursions and is done on the truncated integer (same result).
MMC_CLONES void zoom_store(const uint8_t* __restrict src, const float* __restrict acc,
                           const float* lut, float layers, uint8_t* __restrict out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) {
        const float v = (lut[src[i]] + acc[i]) / layers;
        std::int32_t q = static_cast<std::int32_t>(v * 255.0f);
        q = q < 0 ? 0 : (q > 255 ? 255 : q);
        out[i] = static_cast<uint8_t>(q);
    }
}

void zoom_blur_impl(const uint8_t* src, uint8_t* dst, const Shape& s,
                    const std::vector<double>& zooms) {
    const ptrdiff_t row = s.row();
    float lut_f[256];  // (np.array(img) / 255.).astype(np.float32)
    for (int v = 0; v < 256; ++v) lut_f[v] = static_cast<float>(v / 255.0);
    std::vector<double> image(static_cast<std::size_t>(s.size()));  // as scipy reads them
    for (ptrdiff_t i = 0; i < s.size(); ++i) image[i] = lut_f[src[i]];
    const auto resample_row = s.c == 1 ? zoom_row<1> : (s.c == 3 ? zoom_row<3> : zoom_row<0>);
    std::vector<float> acc(static_cast<std::size_t>(s.size()), 0.0f);
    // Two x-resampled source rows, reused while consecutive output rows share them.
    std::vector<double> cache[2] = {std::vector<double>(row), std::vector<double>(row)};
    for (const double z : zooms) {
        const std::vector<ZoomTap> ty = zoom_axis(s.h, z);
        const std::vector<ZoomTap> tx = zoom_axis(s.w, z);
        ptrdiff_t cached[2] = {-1, -1};
        // Row r resampled along x, evicting the cache slot that does not hold row `keep`.
        auto resampled = [&](ptrdiff_t r, ptrdiff_t keep) -> const double* {
            for (int k = 0; k < 2; ++k) {
                if (cached[k] == r) return cache[k].data();
            }
            const int slot = cached[0] == keep ? 1 : 0;
            resample_row(image.data() + r * row, tx.data(), s.w, s.c, cache[slot].data());
            cached[slot] = r;
            return cache[slot].data();
        };
        for (ptrdiff_t y = 0; y < s.h; ++y) {
            const ZoomTap& t = ty[y];
            if (t.w0 == 0.0 && t.w1 == 0.0) continue;  // outside the input: adds 0
            const double* r0 = resampled(t.i0, t.i1);
            const double* r1 = resampled(t.i1, t.i0);
            zoom_accumulate(acc.data() + y * row, r0, r1, t.w0, t.w1, row);
        }
    }
    zoom_store(src, acc.data(), lut_f, static_cast<float>(zooms.size() + 1), dst, s.size());
}

ImageOut zoom_blur(const ImageIn& image, const Array<double>& zooms) {
    const char* fn = "zoom_blur";
    const Shape s = image_shape(image, fn);
    const ptrdiff_t m = vector_length(zooms, fn, "zooms");
    std::vector<double> z(zooms.data(), zooms.data() + m);
    for (const double f : z) {
        // z >= 1 keeps the crop inside the image; the upper bound keeps round(c * z) in range.
        if (!(f >= 1.0 && f <= 1e6)) {
            throw std::invalid_argument("zoom_blur: zoom factors must lie in [1, 1e6]");
        }
    }
    ImageOut out = new_image(s);
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        zoom_blur_impl(src, dst, s, z);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// filter2d: OpenCV filter2D (correlation, anchor at the kernel centre, BORDER_REFLECT_101) of
// x / 255 in double, then clip to [0, 1], times 255, truncate (the reference DefocusBlur).
//
// Exact plan (kernel only). The taps are grouped into runs of equal value along kernel rows and
// the runs into classes of equal value. For each class the integer sum T of the pixels under its
// runs comes from per-row prefix sums (exact in int32); the result is sum_v v * T_v in double.
// The cost per pixel is the number of runs rather than taps. Taps with magnitude at most
// 2^-53 * sum|k| / (kh * kw) are skipped: all of them together move the result by less than half
// an ulp of double (the ~1e-22 tails that a 3x3 Gaussian with sigma 0.1 leaves, for example).
// Against the reference this has matched on every pixel tested.
//
// Structured plan (kernel, mask, gauss1d). The defocus kernel is a binary disk scaled by 1 / N
// and blurred by a 3x3 or 5x5 Gaussian in float32 (reference `disk()`), so
//     kernel = c * T + R,   T = S + (border terms),   S = (g outer g) (*) mask
// (full 2-D convolution, double), with c = kernel / T at the largest tap of T. The border terms
// are the taps where the reference's blur reflected at the border of the kernel grid or was cut
// off by it (up to ~10% of the largest tap; 160 taps for radius 10 with the 5x5 blur); they are
// products of the mask with the Gaussian's border part along one axis (see plan_structured) and
// cost a few integer runs. R is the remainder: the float32 rounding of the kernel (~1e-7
// relative) and whatever else the model misses. S costs one integer run per mask row (the disk
// sums) plus two passes of the 1-D Gaussian; R keeps its taps above 2^-18 * max|kernel| and is
// evaluated like the exact plan (before the border terms, R held the border taps: radius 10 was
// 2.1x slower, same bytes on 13 M samples but one). The sum of the dropped taps is
// folded into c, so the kernel sum (the gain on flat regions) is kept to double precision. The
// dropped taps move a result by at most 2 * sum|dropped|, below 1e-7 in [0, 1] units for every
// MedMNIST-C kernel; at 224 px this flipped the truncation, by one level, on at most 21 of
// 825,840 samples per kernel, and never on flat regions.
//
// When both plans are available the one with less work per pixel is used (FilterPlan::cost); for
// alias sigma 0.1 the remainder is all negligible and the exact plan is usually the cheaper.
// Before either, filter2d tries the disk plan below, which covers the reference's defocus kernels
// (radius <= 8) and is much faster.

constexpr int kStructureTolExp = -18;  // remainder taps below 2^-18 * max|kernel| are dropped

struct Run {
    ptrdiff_t row, j0, j1;  // kernel row, kernel columns [j0, j1)
};

struct TapClass {
    double value;
    std::vector<Run> runs;
};

// Runs of equal value (|value| > negligible) along the rows of k (kh x kw), grouped by value.
std::vector<TapClass> tap_classes(const double* k, ptrdiff_t kh, ptrdiff_t kw, double negligible) {
    std::vector<TapClass> classes;                // in order of first appearance
    std::unordered_map<double, std::size_t> index;  // value -> position in classes
    for (ptrdiff_t i = 0; i < kh; ++i) {
        const double* krow = k + i * kw;
        for (ptrdiff_t j = 0; j < kw;) {
            ptrdiff_t e = j + 1;
            while (e < kw && krow[e] == krow[j]) ++e;
            const double v = krow[j];
            if (std::fabs(v) > negligible) {
                const auto [it, added] = index.try_emplace(v, classes.size());
                if (added) classes.push_back({v, {}});
                classes[it->second].runs.push_back({i, j, e});
            }
            j = e;
        }
    }
    return classes;
}

// The kernel as evaluated: an optional structured part c * (g outer g) (*) mask with its
// border terms, and classes of runs, all in a frame of (2 fh + 1) x (2 fw + 1) taps centred on
// the anchor.
struct FilterPlan {
    ptrdiff_t fh = 0, fw = 0;
    std::vector<TapClass> classes;
    // Structured part (empty mask_runs: none). Mask runs are in mask coordinates.
    std::vector<Run> mask_runs;
    ptrdiff_t mh = 0, mw = 0;
    std::vector<double> g;         // along x
    std::vector<double> g_scaled;  // along y, times the scale c
    // Border terms of the structured part (see plan_structured): Ev, classes of mask-row runs
    // on the model rows (row = model row + gl / 2), summed over the extended row and blurred
    // along x by g_scaled; Eh, the vertical runs (a0, a1) of the mask columns kept as running
    // sums, combined per column offset (dx: padded column of x = 0) and blurred along y.
    std::vector<TapClass> ev_classes;
    struct ColRun {
        ptrdiff_t a0, a1;
    };
    struct EhTap {
        std::size_t run;
        ptrdiff_t dx;
    };
    struct EhClass {
        double value;
        std::vector<EhTap> taps;
    };
    std::vector<ColRun> col_runs;
    std::vector<EhClass> eh_classes;

    // Work per output sample, in units of one integer run (measured: a double-precision tap of
    // the Gaussian passes costs about two runs).
    std::size_t cost() const {
        std::size_t n = mask_runs.size() + 4 * g.size();
        for (const TapClass& c : classes) n += c.runs.size();
        if (!ev_classes.empty()) {
            n += 2 * g.size();
            for (const TapClass& c : ev_classes) n += c.runs.size() + 2;
        }
        if (!eh_classes.empty()) n += 2 + col_runs.size();
        for (const EhClass& c : eh_classes) n += c.taps.size() + 2;
        return n;
    }
};

FilterPlan plan_exact(const double* k, ptrdiff_t kh, ptrdiff_t kw) {
    double l1 = 0.0;
    for (ptrdiff_t i = 0; i < kh * kw; ++i) l1 += std::fabs(k[i]);
    FilterPlan plan;
    plan.fh = kh / 2;
    plan.fw = kw / 2;
    plan.classes = tap_classes(k, kh, kw, std::ldexp(l1, -53) / static_cast<double>(kh * kw));
    return plan;
}

// Border part of a Gaussian blur with reflect-101 on a grid of n taps (OpenCV's GaussianBlur of
// the reference's disk): E = A - F, (n + gl - 1) x n, row i + gl / 2 for output row i in
// [-gl / 2, n + gl / 2), where A[i][a] = sum of g[t + gl / 2] over the t with
// reflect101(i + t) == a for i inside the grid (0 outside it) and F[i][a] = g[a - i + gl / 2]
// (|a - i| <= gl / 2) is the plain, untruncated blur. Nonzero only within gl / 2 of the grid's
// border: the taps the reflection adds and the ones the truncation removes.
std::vector<double> border_blur_difference(ptrdiff_t n, const double* g, ptrdiff_t gl) {
    const ptrdiff_t half = gl / 2, rows = n + gl - 1;
    std::vector<double> e(static_cast<std::size_t>(rows * n), 0.0);
    for (ptrdiff_t i = -half; i < n + half; ++i) {
        double* erow = e.data() + (i + half) * n;
        for (ptrdiff_t t = -half; t <= half; ++t) {
            const double w = g[t + half];
            if (i >= 0 && i < n) erow[reflect101_index(i + t, n)] += w;
            if (i + t >= 0 && i + t < n) erow[i + t] -= w;
        }
    }
    return e;
}

// The structured plan. With M the 0/1 mask, g the 1-D Gaussian and E_v, E_h the border parts
// of its reflect-101 blur along y and x (border_blur_difference; zero when the kernel and mask
// grids differ), the reference kernel is, up to its float32 rounding,
//     K = c (F + E_v) M (F + E_h)^T = c (F M F^T + E_v M F^T + F M E_h^T + E_v M E_h^T).
// The first three terms are evaluated with integer sums: F M F^T as mask-row runs (the disk
// sums B) blurred by g along x and y; E_v M F^T as mask-row runs on the few rows E_v touches,
// blurred along x; F M E_h^T as vertical runs of the border columns, blurred along y. The
// remainder R = K - c T (T the three terms) holds E_v M E_h^T (empty for disks wider than a
// few pixels) and the float32 rounding; its taps above 2^-18 * max|kernel| are evaluated like
// the exact plan.
FilterPlan plan_structured(const double* k, ptrdiff_t kh, ptrdiff_t kw, const uint8_t* mask,
                           ptrdiff_t mh, ptrdiff_t mw, const double* g, ptrdiff_t gl) {
    FilterPlan plan;
    plan.mh = mh;
    plan.mw = mw;
    plan.g.assign(g, g + gl);
    // T spans (mh + gl - 1) x (mw + gl - 1) taps.
    plan.fh = std::max(kh / 2, mh / 2 + gl / 2);
    plan.fw = std::max(kw / 2, mw / 2 + gl / 2);
    const ptrdiff_t fkh = 2 * plan.fh + 1, fkw = 2 * plan.fw + 1;
    std::vector<double> kf(static_cast<std::size_t>(fkh * fkw), 0.0);
    std::vector<double> sf(kf.size(), 0.0);
    for (ptrdiff_t i = 0; i < kh; ++i) {
        for (ptrdiff_t j = 0; j < kw; ++j) {
            kf[(i + plan.fh - kh / 2) * fkw + j + plan.fw - kw / 2] = k[i * kw + j];
        }
    }
    const ptrdiff_t oy = plan.fh - mh / 2 - gl / 2, ox = plan.fw - mw / 2 - gl / 2;
    const ptrdiff_t th = mh + gl - 1, tw = mw + gl - 1;  // model rows and columns
    // Model rows and columns of the blur along y (F + E_v) and x: entry [i][a], i a model row,
    // a a mask row. The border terms apply when the kernel is the blurred mask on its own grid.
    const bool border = gl >= 3 && kh == mh && kw == mw;
    const std::vector<double> ev =
        border ? border_blur_difference(mh, g, gl) : std::vector<double>(th * mh, 0.0);
    const std::vector<double> eh =
        border ? border_blur_difference(mw, g, gl) : std::vector<double>(tw * mw, 0.0);
    // X = M F^T (mask rows x model columns), then T = F X + E_v X + F M E_h^T.
    std::vector<double> x(static_cast<std::size_t>(mh * tw), 0.0);
    for (ptrdiff_t a = 0; a < mh; ++a) {
        for (ptrdiff_t b = 0; b < mw; ++b) {
            if (!mask[a * mw + b]) continue;
            for (ptrdiff_t t = 0; t < gl; ++t) x[a * tw + b + t] += g[t];
        }
    }
    for (ptrdiff_t i = 0; i < th; ++i) {
        double* srow = sf.data() + (oy + i) * fkw + ox;
        for (ptrdiff_t a = 0; a < mh; ++a) {
            const ptrdiff_t t = i - a;  // F[i][a] = g[t] for t in [0, gl)
            const double w = (t >= 0 && t < gl ? g[t] : 0.0) + ev[i * mh + a];
            if (w == 0.0) continue;
            for (ptrdiff_t j = 0; j < tw; ++j) srow[j] += w * x[a * tw + j];
        }
    }
    std::vector<std::pair<ptrdiff_t, ptrdiff_t>> eh_nz;  // (model column, mask column)
    for (ptrdiff_t j = 0; j < tw; ++j) {
        for (ptrdiff_t b = 0; b < mw; ++b) {
            if (eh[j * mw + b] != 0.0) eh_nz.emplace_back(j, b);
        }
    }
    for (ptrdiff_t a = 0; a < mh; ++a) {
        for (const auto& [j, b] : eh_nz) {
            if (!mask[a * mw + b]) continue;
            for (ptrdiff_t t = 0; t < gl; ++t) {
                sf[(oy + a + t) * fkw + ox + j] += g[t] * eh[j * mw + b];
            }
        }
    }
    const auto peak = std::max_element(sf.begin(), sf.end()) - sf.begin();
    if (!(sf[peak] > 0.0)) {
        throw std::invalid_argument("filter2d: mask and gauss1d must describe a positive kernel");
    }
    const double c = kf[peak] / sf[peak];
    double kmax = 0.0, s_sum = 0.0, dropped = 0.0;
    for (const double v : kf) kmax = std::max(kmax, std::fabs(v));
    for (const double v : sf) s_sum += v;
    const double tol = std::ldexp(kmax, kStructureTolExp);
    std::vector<double> rem(kf.size());
    for (std::size_t p = 0; p < kf.size(); ++p) {
        const double r = kf[p] - c * sf[p];
        if (std::fabs(r) > tol) {
            rem[p] = r;
        } else {
            rem[p] = 0.0;
            dropped += r;
        }
    }
    const double scale = c + dropped / s_sum;
    for (const double v : plan.g) plan.g_scaled.push_back(scale * v);
    plan.classes = tap_classes(rem.data(), fkh, fkw, 0.0);
    std::vector<std::vector<Run>> row_runs(static_cast<std::size_t>(mh));
    for (ptrdiff_t i = 0; i < mh; ++i) {
        for (ptrdiff_t j = 0; j < mw;) {
            ptrdiff_t e = j;
            while (e < mw && mask[i * mw + e]) ++e;
            if (e > j) {
                plan.mask_runs.push_back({i, j, e});
                row_runs[i].push_back({i, j, e});
            }
            j = std::max(e, j + 1);
        }
    }
    // E_v M F^T: the runs of mask row a on model row i, in the class of the value E_v[i][a].
    for (ptrdiff_t i = 0; i < th; ++i) {
        for (ptrdiff_t a = 0; a < mh; ++a) {
            const double v = ev[i * mh + a];
            if (v == 0.0 || row_runs[a].empty()) continue;
            auto cls = std::find_if(plan.ev_classes.begin(), plan.ev_classes.end(),
                                    [v](const TapClass& t) { return t.value == v; });
            if (cls == plan.ev_classes.end()) {
                plan.ev_classes.push_back({v, {}});
                cls = plan.ev_classes.end() - 1;
            }
            for (const Run& r : row_runs[a]) cls->runs.push_back({i, r.j0, r.j1});
        }
    }
    // F M E_h^T: the vertical runs of the mask columns E_h touches, each kept once.
    for (const auto& [j, b] : eh_nz) {
        for (ptrdiff_t a = 0; a < mh;) {
            ptrdiff_t e = a;
            while (e < mh && mask[e * mw + b]) ++e;
            if (e > a) {
                std::size_t run = 0;
                while (run < plan.col_runs.size() &&
                       (plan.col_runs[run].a0 != a || plan.col_runs[run].a1 != e - 1)) {
                    ++run;
                }
                if (run == plan.col_runs.size()) plan.col_runs.push_back({a, e - 1});
                // Model column j is image column x + j - mw / 2 - gl / 2, padded x + j + ox.
                const double v = eh[j * mw + b];
                auto cls = std::find_if(plan.eh_classes.begin(), plan.eh_classes.end(),
                                        [v](const FilterPlan::EhClass& t) { return t.value == v; });
                if (cls == plan.eh_classes.end()) {
                    plan.eh_classes.push_back({v, {}});
                    cls = plan.eh_classes.end() - 1;
                }
                cls->taps.push_back({run, j + ox});
            }
            a = std::max(e, a + 1);
        }
    }
    return plan;
}

// Per-channel prefix sums of a row of n_px pixels: out[x * C + ch] = sum of in[x' * C + ch] for
// x' < x, x in [0, n_px]. CT > 0 fixes the channel count at compile time (1 and 3 are the common
// cases), so that the running sums stay in registers; CT = 0 reads c.
template <int CT>
void prefix_sums(const uint8_t* in, ptrdiff_t n_px, ptrdiff_t c_runtime, std::int32_t* out) {
    if constexpr (CT > 0) {
        std::int32_t run[CT] = {};
        for (int ch = 0; ch < CT; ++ch) out[ch] = 0;
        for (ptrdiff_t x = 0; x < n_px; ++x) {
            for (int ch = 0; ch < CT; ++ch) {
                run[ch] += in[x * CT + ch];
                out[(x + 1) * CT + ch] = run[ch];
            }
        }
    } else {
        const ptrdiff_t c = c_runtime;
        std::fill(out, out + c, 0);
        for (ptrdiff_t i = 0; i < n_px * c; ++i) out[i + c] = out[i] + in[i];
    }
}

// t[i] = hi[i] - lo[i]
MMC_CLONES void run_sums(std::int32_t* __restrict t, const std::int32_t* __restrict hi,
                         const std::int32_t* __restrict lo, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) t[i] = hi[i] - lo[i];
}

// t[i] += (hi0[i] - lo0[i]) + (hi1[i] - lo1[i])
MMC_CLONES void add_run_pair_sums(std::int32_t* __restrict t, const std::int32_t* __restrict hi0,
                                  const std::int32_t* __restrict lo0,
                                  const std::int32_t* __restrict hi1,
                                  const std::int32_t* __restrict lo1, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) t[i] += (hi0[i] - lo0[i]) + (hi1[i] - lo1[i]);
}

// t[i] = sum_r (hi[r][i] - lo[r][i]): the pixel sums of `count` runs from the prefix sums of their
// rows (t = 0 when count == 0). Two runs per pass halve the traffic on t.
void sum_runs(std::int32_t* t, const std::int32_t* const* hi, const std::int32_t* const* lo,
              ptrdiff_t count, ptrdiff_t n) {
    ptrdiff_t r = count % 2;
    if (r == 1) {
        run_sums(t, hi[0], lo[0], n);
    } else {
        std::fill(t, t + n, 0);
    }
    for (; r < count; r += 2) add_run_pair_sums(t, hi[r], lo[r], hi[r + 1], lo[r + 1], n);
}

// acc[j] += sum over classes c (in order) of values[c] * t_c[j], t_c[j] the integer sum of
// hi[r][j] - lo[r][j] over the runs r of class c (runs class_end[c - 1] .. class_end[c] - 1).
// The same integer sums and the same sequence of double additions as summing each class's
// runs into a row and then adding value * sum to acc, class by class (integer sums are exact,
// so their order is free), but over blocks of 8 kFusedVecs samples whose sums stay in
// registers instead of passing over the row once per run and once per class.
constexpr int kFusedVecs = 4;  // 8-lane vectors per block: 32 samples
typedef std::int32_t fused_i8 __attribute__((vector_size(32)));
typedef std::int32_t fused_i4 __attribute__((vector_size(16)));
typedef double fused_d4 __attribute__((vector_size(32)));
MMC_CLONES void add_classes_fused(double* __restrict acc, const std::int32_t* const* hi,
                                  const std::int32_t* const* lo, const ptrdiff_t* class_end,
                                  const double* values, ptrdiff_t n_classes, ptrdiff_t n) {
    constexpr ptrdiff_t kLanes = 8 * kFusedVecs;
    ptrdiff_t j0 = 0;
    for (; j0 + kLanes <= n; j0 += kLanes) {
        fused_d4 a[2 * kFusedVecs];
        std::memcpy(a, acc + j0, sizeof a);
        ptrdiff_t r = 0;
        for (ptrdiff_t c = 0; c < n_classes; ++c) {
            fused_i8 t[kFusedVecs] = {};
            for (; r < class_end[c]; ++r) {
                for (int v = 0; v < kFusedVecs; ++v) {
                    fused_i8 h, l;
                    std::memcpy(&h, hi[r] + j0 + 8 * v, sizeof h);
                    std::memcpy(&l, lo[r] + j0 + 8 * v, sizeof l);
                    t[v] += h - l;
                }
            }
            const fused_d4 val = {values[c], values[c], values[c], values[c]};
            for (int v = 0; v < kFusedVecs; ++v) {
                const fused_i4 t0 = __builtin_shufflevector(t[v], t[v], 0, 1, 2, 3);
                const fused_i4 t1 = __builtin_shufflevector(t[v], t[v], 4, 5, 6, 7);
                a[2 * v] += val * __builtin_convertvector(t0, fused_d4);
                a[2 * v + 1] += val * __builtin_convertvector(t1, fused_d4);
            }
        }
        std::memcpy(acc + j0, a, sizeof a);
    }
    for (ptrdiff_t j = j0; j < n; ++j) {
        ptrdiff_t r = 0;
        for (ptrdiff_t c = 0; c < n_classes; ++c) {
            std::int32_t t = 0;
            for (; r < class_end[c]; ++r) t += hi[r][j] - lo[r][j];
            acc[j] += values[c] * static_cast<double>(t);
        }
    }
}

// out[j] = sum_b g[b] * t[j + b * stride], b ascending
MMC_CLONES void correlate_int_row(double* __restrict out, const std::int32_t* __restrict t,
                                  const double* g, ptrdiff_t taps, ptrdiff_t stride, ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; ++j) out[j] = g[0] * static_cast<double>(t[j]);
    for (ptrdiff_t b = 1; b < taps; ++b) {
        const double gb = g[b];
        const std::int32_t* src = t + b * stride;
        for (ptrdiff_t j = 0; j < n; ++j) out[j] += gb * static_cast<double>(src[j]);
    }
}

// acc[j] = sum_a g[a] * rows[a][j], a ascending
MMC_CLONES void correlate_double_rows(double* __restrict acc, const double* const* rows,
                                      const double* g, ptrdiff_t taps, ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; ++j) acc[j] = g[0] * rows[0][j];
    for (ptrdiff_t a = 1; a < taps; ++a) {
        const double ga = g[a];
        const double* src = rows[a];
        for (ptrdiff_t j = 0; j < n; ++j) acc[j] += ga * src[j];
    }
}

// acc[j] += sum_b g[b] * src[j + b * stride], b ascending
MMC_CLONES void add_correlated_row(double* __restrict acc, const double* __restrict src,
                                   const double* g, ptrdiff_t taps, ptrdiff_t stride,
                                   ptrdiff_t n) {
    for (ptrdiff_t b = 0; b < taps; ++b) {
        const double gb = g[b];
        const double* s = src + b * stride;
        for (ptrdiff_t j = 0; j < n; ++j) acc[j] += gb * s[j];
    }
}

// run[i] += hi[i] - lo[i]
MMC_CLONES void slide_run(std::int32_t* __restrict run, const uint8_t* __restrict hi,
                          const uint8_t* __restrict lo, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) run[i] += static_cast<std::int32_t>(hi[i]) - lo[i];
}

// out = trunc(clip(acc / 255, 0, 1) * 255), acc being the filtered 0..255 image. Clipping the
// truncated integer to [0, 255] gives the same result and vectorises; |acc| <= 255 * 1024 by the
// check on sum|kernel| in filter2d().
MMC_CLONES void store_unit_interval(const double* __restrict acc, uint8_t* __restrict out,
                                    ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; ++i) {
        std::int32_t q = static_cast<std::int32_t>(acc[i] / 255.0 * 255.0);
        q = q < 0 ? 0 : (q > 255 ? 255 : q);
        out[i] = static_cast<uint8_t>(q);
    }
}

// Classes' runs in one list (class c ends at end[c]) and their values, as add_classes_fused
// takes them.
struct FlatClasses {
    std::vector<Run> runs;
    std::vector<ptrdiff_t> end;
    std::vector<double> values;
};

FlatClasses flatten(const std::vector<TapClass>& classes) {
    FlatClasses f;
    for (const TapClass& cls : classes) {
        f.runs.insert(f.runs.end(), cls.runs.begin(), cls.runs.end());
        f.end.push_back(static_cast<ptrdiff_t>(f.runs.size()));
        f.values.push_back(cls.value);
    }
    return f;
}

void filter2d_impl(const uint8_t* src, uint8_t* dst, const Shape& s, const FilterPlan& plan) {
    const ptrdiff_t row = s.row();
    const ptrdiff_t fkh = 2 * plan.fh + 1;
    const ptrdiff_t wp = s.w + 2 * plan.fw;  // padded width
    const ptrdiff_t prow = (wp + 1) * s.c;   // prefix-sum row: P[xp * C + ch], xp in [0, wp]
    const ptrdiff_t lpad = wp * s.c;         // padded row
    const auto prefix_row =
        s.c == 1 ? prefix_sums<1> : (s.c == 3 ? prefix_sums<3> : prefix_sums<0>);
    // Rings of the padded rows and of their prefix sums, padded rows [y, y + 2 fh] (padded row
    // yp in slot yp % fkh).
    std::vector<uint8_t> padded(static_cast<std::size_t>(fkh * lpad));
    std::vector<std::int32_t> ring(static_cast<std::size_t>(fkh * prow));
    auto prefix = [&](ptrdiff_t yp) { return ring.data() + (yp % fkh) * prow; };
    auto pixels = [&](ptrdiff_t yp) { return padded.data() + (yp % fkh) * lpad; };
    auto fill = [&](ptrdiff_t yp) {
        pad_row_reflect101(src + reflect101_index(yp - plan.fh, s.h) * row, s.w, s.c, plan.fw,
                           pixels(yp));
        prefix_row(pixels(yp), wp, s.c, prefix(yp));
    };
    // Run pointers into the prefix rows: run sums start at hi - lo. The prefix row of each
    // kernel row is looked up once per output row (one modulo per kernel row, not per run).
    std::vector<const std::int32_t*> hi, lo, rows_of(static_cast<std::size_t>(fkh));
    auto runs_at = [&](const std::vector<Run>& runs, ptrdiff_t yp0, ptrdiff_t col0) {
        hi.resize(runs.size());
        lo.resize(runs.size());
        for (ptrdiff_t i = 0; i < fkh; ++i) rows_of[i] = prefix(yp0 + i) + col0;
        for (std::size_t k = 0; k < runs.size(); ++k) {
            const Run& r = runs[k];
            hi[k] = rows_of[r.row] + r.j1 * s.c;
            lo[k] = rows_of[r.row] + r.j0 * s.c;
        }
    };
    // Structured part: mask sums at extended output row yb (columns x + b, b in [0, gl)),
    // filtered along x by g into the ring `hrows` (row yb in slot (yb + gl / 2) % gl).
    const bool structured = !plan.mask_runs.empty();
    const auto gl = static_cast<ptrdiff_t>(plan.g.size());
    const ptrdiff_t brow = (s.w + gl - 1) * s.c;
    const ptrdiff_t oy = plan.fh - plan.mh / 2 - gl / 2, ox = plan.fw - plan.mw / 2 - gl / 2;
    // Border term F M E_h^T: running sums of the columns' vertical runs at model row yv (padded
    // rows yv + oy + a0 .. yv + oy + a1), combined by class into Eh(yv), which is added to the
    // x-filtered disk sums of row yv - gl / 2 (both are then filtered along y).
    const bool has_eh = !plan.eh_classes.empty();
    const auto ncr = static_cast<ptrdiff_t>(plan.col_runs.size());
    std::vector<std::int32_t> col_sums(has_eh ? ncr * lpad : 0);
    std::vector<std::int32_t> zeros(has_eh ? lpad : 0, 0);
    std::vector<const std::int32_t*> eh_hi, eh_lo;
    std::vector<ptrdiff_t> eh_end;
    std::vector<double> eh_values;
    for (const FilterPlan::EhClass& cls : plan.eh_classes) {
        for (const FilterPlan::EhTap& t : cls.taps) {
            eh_hi.push_back(col_sums.data() + static_cast<ptrdiff_t>(t.run) * lpad + t.dx * s.c);
            eh_lo.push_back(zeros.data());
        }
        eh_end.push_back(static_cast<ptrdiff_t>(eh_hi.size()));
        eh_values.push_back(cls.value);
    }
    auto eh_add = [&](ptrdiff_t yv, double* out) {
        for (ptrdiff_t r = 0; r < ncr; ++r) {
            std::int32_t* cs = col_sums.data() + r * lpad;
            const FilterPlan::ColRun& cr = plan.col_runs[static_cast<std::size_t>(r)];
            if (yv == 0) {
                std::fill(cs, cs + lpad, 0);
                for (ptrdiff_t a = cr.a0; a <= cr.a1; ++a) {
                    const uint8_t* px = pixels(a + oy);
                    for (ptrdiff_t i = 0; i < lpad; ++i) cs[i] += px[i];
                }
            } else {
                slide_run(cs, pixels(yv + oy + cr.a1), pixels(yv - 1 + oy + cr.a0), lpad);
            }
        }
        add_classes_fused(out, eh_hi.data(), eh_lo.data(), eh_end.data(), eh_values.data(),
                          static_cast<ptrdiff_t>(eh_values.size()), row);
    };
    std::vector<std::int32_t> bsum(structured ? brow : 0);
    std::vector<double> hrows(structured ? gl * row : 0);
    std::vector<const double*> hptr(static_cast<std::size_t>(gl));
    auto hrow = [&](ptrdiff_t yb) { return hrows.data() + ((yb + gl / 2) % gl) * row; };
    auto mask_row = [&](ptrdiff_t yb) {
        runs_at(plan.mask_runs, yb + plan.fh - plan.mh / 2, ox * s.c);
        sum_runs(bsum.data(), hi.data(), lo.data(), static_cast<ptrdiff_t>(hi.size()), brow);
        correlate_int_row(hrow(yb), bsum.data(), plan.g.data(), gl, s.c, row);
        if (has_eh) eh_add(yb + gl / 2, hrow(yb));
    };
    // Border term E_v M F^T, summed over the extended row.
    const FlatClasses ev = flatten(plan.ev_classes);
    std::vector<double> ev_acc(ev.runs.empty() ? 0 : brow);
    for (ptrdiff_t yp = 0; yp + 1 < fkh; ++yp) fill(yp);
    if (structured) {
        for (ptrdiff_t yb = -gl / 2; yb < gl / 2; ++yb) mask_row(yb);
    }
    std::vector<double> acc(static_cast<std::size_t>(row));
    const FlatClasses rem = flatten(plan.classes);
    for (ptrdiff_t y = 0; y < s.h; ++y) {
        fill(y + fkh - 1);
        if (structured) {
            mask_row(y + gl / 2);
            for (ptrdiff_t a = 0; a < gl; ++a) hptr[a] = hrow(y + a - gl / 2);
            correlate_double_rows(acc.data(), hptr.data(), plan.g_scaled.data(), gl, row);
        } else {
            std::fill(acc.begin(), acc.end(), 0.0);
        }
        if (!ev.runs.empty()) {
            std::fill(ev_acc.begin(), ev_acc.end(), 0.0);
            runs_at(ev.runs, y + oy, ox * s.c);
            add_classes_fused(ev_acc.data(), hi.data(), lo.data(), ev.end.data(),
                              ev.values.data(), static_cast<ptrdiff_t>(ev.values.size()), brow);
            add_correlated_row(acc.data(), ev_acc.data(), plan.g_scaled.data(), gl, s.c, row);
        }
        runs_at(rem.runs, y, 0);
        add_classes_fused(acc.data(), hi.data(), lo.data(), rem.end.data(), rem.values.data(),
                          static_cast<ptrdiff_t>(rem.values.size()), row);
        store_unit_interval(acc.data(), dst + y * row, row);
    }
}

// ---------------------------------------------------------------------------------------------
// filter2d, disk plan: the fast path for the reference's defocus kernels (kernel, mask, gauss1d).
//
// The reference kernel is K = GaussianBlur(mask / N) in float32 (reference `disk()`), with a
// 3-tap symmetric Gaussian g = (g0, g1, g0) and OpenCV's reflect-101 at the border of the kernel
// grid. Along one axis of n taps that blur is the matrix A = g1 I + g0 J, where J is the integer
// matrix with ones beside the diagonal plus the reflected taps J[0][1] += 1, J[n-1][n-2] += 1.
// In exact arithmetic, then,
//     K = (1/N) (g1^2 D + g0 g1 Me + g0^2 Mk),   Me = Jv D + D Jh^T,   Mk = Jv D Jh^T,
// with D the 0/1 mask and Me, Mk small integer matrices. The plan takes that model with its
// scale c fitted so that the model's sum equals sum(K) (the gain on flat regions is kept to
// double precision), and accepts it only if every tap of K - model is at most 2^-18 max|K|
// (otherwise filter2d uses the structured or exact plans): the difference is then the float32
// rounding of K's construction, about 2^-24 relative per tap, which moves results by a few 1e-7
// of a gray level at most and flips a truncation only when the exact result lies that close to
// an integer.
//
// Evaluation, with integer sums throughout (exact; uint16 modulo 2^16 where the true sum is at
// most 255 N <= 65535, which the plan requires):
//   rings       the mask must be a disk in this sense: each row one run centred on the anchor
//               column, the half widths symmetric in dy and non-increasing in |dy|. With the
//               distinct half widths w_0 < ... < w_{m-1}, ring j is the columns
//               w_{j-1} < |dx| <= w_j (w_{-1} = -1), which the disk covers on rows |dy| <= h_j;
//   D_j(y', x)  sum of p(y', x + dx) over the columns of ring j, kept in a ring buffer of
//               2 h_j + 1 rows;
//   B(y', x)    sum over j and |dy| <= h_j of D_j(y' + dy, x): the disk sum, computed once and
//               then updated from row to row by the entering and leaving row of every ring,
//               B(y' + 1) = B(y') + sum_j D_j(y' + 1 + h_j) - D_j(y' - h_j) (2 m rows per row);
//   E           the 4 edge neighbours of B, plus the taps of Me - Me_full;
//   C           the 4 corner neighbours of B, plus the taps of Mk - Mk_full;
// where Me_full, Mk_full are Me, Mk without the border of the kernel grid (no truncation, no
// reflection): their differences are the few taps near the grid border (none unless the blurred
// disk reaches it: radius >= 7 on the -8..8 grid), in the split form (vertical part Ev at the
// output row, horizontal part Eh at rows y - 1, y, y + 1), summed as int16 (at most 128 taps a
// list). U = B(y - 1) + B(y + 1) + Ev is formed first, then E = U + B(y, x -+ 1) + Eh(y) and
// C = U(x -+ 1) + Eh(y -+ 1). The result c g1^2 (B + rho (E + rho C)), rho = g0 / g1, in double,
// is truncated to [0, 255] as in the reference (x / 255 filtered, clipped, times 255,
// truncated; the division and product by 255 are not repeated: they move a result by an ulp).
// That double value is what the plan reproduces; the strips below evaluate it in float32 first
// and fall back to it where float32 cannot decide the truncation.
// Without the Gaussian (g0 negligible) the result is trunc(wc B), wc = sum(K) / N; when an
// integer division floor((B + a) M / 2^s) - e reproduces it for every B in [0, 255 N] (checked
// when planning) that form is used instead of the double product.

// Hot loops are compiled for AVX-512 (x86-64-v4, 512-bit vectors), AVX2 (with FMA) and the
// baseline and picked at run time. Every variant evaluates the same expressions in the same
// order without contraction (-ffp-contract=off), so they agree bit for bit. The one exception is
// the float32 pre-decision of the Gaussian plans, where the FMA variants fuse multiply-adds
// (Isa::fmadd): that only removes roundings from an evaluation whose error bound counts them,
// and every result it decides is the plan's double value truncated, so the outputs still agree.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MMC_DISK_DISPATCH 1
#define MMC_INLINE inline __attribute__((always_inline))
#define MMC_LAMBDA_INLINE __attribute__((always_inline))  // else compiled for the baseline ISA
#else
#define MMC_DISK_DISPATCH 0
#define MMC_INLINE inline
#define MMC_LAMBDA_INLINE
#endif

constexpr int kDiskTolExp = -18;  // model accepted if |K - model| <= 2^-18 max|K| on every tap

// Taps (dy, dx) from the anchor, each listed |coefficient| times.
using DiskTaps = std::vector<std::pair<ptrdiff_t, ptrdiff_t>>;

// A vertical run of correction taps: rows dy0..dy1 of column dx, added (sign 1) or subtracted.
struct DiskRun {
    ptrdiff_t dx, dy0, dy1;
    int sign;
};

// Horizontal runs of correction taps over columns dx0..dx1, on the rows dy (with their signs).
struct DiskSpan {
    ptrdiff_t dx0, dx1;
    std::vector<std::pair<ptrdiff_t, int>> rows;  // (dy, sign)
};

constexpr ptrdiff_t kDiskMinRun = 3;  // shorter runs stay single taps

// Runs of at least kDiskMinRun taps along one axis (vertical: same dx, consecutive dy) among
// the taps of one sign; the taps in no run go to `rest`. A tap listed twice is in at most one
// run.
std::vector<std::pair<std::pair<ptrdiff_t, ptrdiff_t>, ptrdiff_t>> disk_runs(
    DiskTaps taps, bool vertical, DiskTaps& rest) {
    // Each run as (first tap, length); sorted along the run's axis within its line.
    auto key = [vertical](const std::pair<ptrdiff_t, ptrdiff_t>& t) {
        return vertical ? std::make_pair(t.second, t.first) : t;
    };
    std::sort(taps.begin(), taps.end(), [&](const auto& a, const auto& b) {
        return key(a) < key(b);
    });
    std::vector<std::pair<std::pair<ptrdiff_t, ptrdiff_t>, ptrdiff_t>> runs;
    std::vector<bool> used(taps.size(), false);
    for (std::size_t i = 0; i < taps.size(); ++i) {
        if (used[i]) continue;
        std::vector<std::size_t> members{i};
        for (std::size_t j = i + 1; j < taps.size(); ++j) {
            const auto a = key(taps[members.back()]), b = key(taps[j]);
            if (used[j] || b.first != a.first) continue;
            if (b.second == a.second) continue;  // a repeated tap: left for another pass
            if (b.second != a.second + 1) break;
            members.push_back(j);
        }
        if (static_cast<ptrdiff_t>(members.size()) >= kDiskMinRun) {
            for (const std::size_t m : members) used[m] = true;
            runs.push_back({taps[i], static_cast<ptrdiff_t>(members.size())});
        }
    }
    for (std::size_t i = 0; i < taps.size(); ++i) {
        if (!used[i]) rest.push_back(taps[i]);
    }
    return runs;
}


// One ring of the disk: the columns dx with w_{j-1} < |dx| <= w_j (w_{-1} = -1), which the disk
// covers on the rows |dy| <= h.
struct DiskRing {
    ptrdiff_t h = 0;
    std::vector<ptrdiff_t> dx;
};

struct DiskPlan {
    ptrdiff_t fh = 0, fw = 0;     // rows / columns of reflect-101 padding
    std::vector<DiskRing> rings;  // by increasing half width
    double wc = 0.0;              // c g1^2 (Gaussian plans) or sum(K) / N
    double rho = 0.0;             // g0 / g1
    bool gauss = false;           // false: g0 negligible, folded into wc
    // Gaussian plans: the float32 evaluation decides a truncation when trunc(r -+ near) agree
    // (see disk_filter_body); near is twice the float32 error bound of this plan, at least 2^-11.
    float near = 0.0f;
    // Gaussian plans with a small neighbour weight (tiny): the plan's value lies in
    // [wc B - lo, wc B + hi] for every E, C >= 0 the image allows, so where
    // trunc(fl(B wcf) - tiny_lo) and trunc(fl(B wcf) + tiny_hi) agree that is the result and
    // E and C are not needed (see disk_filter_body).
    bool tiny = false;
    float tiny_wc = 0.0f, tiny_lo = 0.0f, tiny_hi = 0.0f;
    // Integer form of the scaled store (Gaussian-free plans, when it reproduces it for every
    // disk sum): out = clamp(((B + div_add) * div_mul >> div_shift) - div_sub, 0, 255).
    bool div = false;
    std::uint32_t div_add = 0, div_mul = 0, div_shift = 0, div_sub = 0;
    // Border corrections in split form: Me - Me_full = Ev + Eh, the parts from the vertical and
    // the horizontal blur, and Mk - Mk_full = (Ev shifted by one column either way) + (Eh
    // shifted by one row either way); taps added (pos) and subtracted (neg).
    DiskTaps vert_pos, vert_neg, horz_pos, horz_neg;
    bool corrected() const {
        return !(vert_pos.empty() && vert_neg.empty() && horz_pos.empty() && horz_neg.empty());
    }
    // The same taps as evaluated (disk_group_corrections). Eh: vertical runs of taps (one
    // column, consecutive rows), kept as running sums from row to row, and single taps. Ev:
    // horizontal runs of taps (one row, consecutive columns) whose column span recurs on other
    // rows, summed once per image row into a ring and read back for every row that uses it,
    // and single taps.
    std::vector<DiskRun> eh_runs;
    DiskTaps eh_pos, eh_neg;
    std::vector<DiskSpan> ev_spans;
    DiskTaps ev_pos, ev_neg;
};

void disk_group_corrections(DiskPlan& plan) {
    for (const int sign : {1, -1}) {
        DiskTaps& rest = sign > 0 ? plan.eh_pos : plan.eh_neg;
        for (const auto& [first, len] :
             disk_runs(sign > 0 ? plan.horz_pos : plan.horz_neg, true, rest)) {
            plan.eh_runs.push_back({first.second, first.first, first.first + len - 1, sign});
        }
    }
    // Horizontal runs of Ev by column span; a span on one row only stays single taps.
    std::vector<std::pair<DiskSpan, DiskTaps>> spans;  // with the taps, for spans used once
    for (const int sign : {1, -1}) {
        DiskTaps& rest = sign > 0 ? plan.ev_pos : plan.ev_neg;
        for (const auto& [first, len] :
             disk_runs(sign > 0 ? plan.vert_pos : plan.vert_neg, false, rest)) {
            const ptrdiff_t dx0 = first.second, dx1 = first.second + len - 1;
            auto it = std::find_if(spans.begin(), spans.end(), [&](const auto& sp) {
                return sp.first.dx0 == dx0 && sp.first.dx1 == dx1;
            });
            if (it == spans.end()) {
                spans.push_back({{dx0, dx1, {}}, {}});
                it = spans.end() - 1;
            }
            it->first.rows.push_back({first.first, sign});
            for (ptrdiff_t dx = dx0; dx <= dx1; ++dx) {
                it->second.emplace_back(first.first, dx);
            }
        }
    }
    for (auto& [span, taps] : spans) {
        if (span.rows.size() >= 2) {
            plan.ev_spans.push_back(std::move(span));
        } else {
            DiskTaps& rest = span.rows[0].second > 0 ? plan.ev_pos : plan.ev_neg;
            rest.insert(rest.end(), taps.begin(), taps.end());
        }
    }
}

// Taps of (m - full) over the frame: positive differences into pos, negative into neg, each
// listed |difference| times.
void disk_corrections(const std::vector<std::int32_t>& m, const std::vector<std::int32_t>& full,
                      ptrdiff_t fkw, ptrdiff_t fh, ptrdiff_t fw, DiskTaps& pos, DiskTaps& neg) {
    for (std::size_t p = 0; p < m.size(); ++p) {
        const std::int32_t d = m[p] - full[p];
        const auto pp = static_cast<ptrdiff_t>(p);
        for (std::int32_t r = 0; r < std::abs(d); ++r) {
            (d > 0 ? pos : neg).emplace_back(pp / fkw - fh, pp % fkw - fw);
        }
    }
}

MMC_INLINE uint8_t disk_quantise(double acc) {
    std::int32_t q = static_cast<std::int32_t>(acc);  // |acc| <= 255 * 1024 (gain check)
    q = q < 0 ? 0 : (q > 255 ? 255 : q);
    return static_cast<uint8_t>(q);
}

MMC_INLINE uint8_t disk_divide(std::uint32_t b, std::uint32_t add, std::uint32_t mul,
                               std::uint32_t shift, std::uint32_t sub) {
    const auto q = static_cast<std::int32_t>(((b + add) * mul) >> shift) -
                   static_cast<std::int32_t>(sub);
    return static_cast<uint8_t>(q < 0 ? 0 : (q > 255 ? 255 : q));
}

// The scaled store trunc(wc B) of a Gaussian-free plan is, for wc close to 1 / N, a division by
// N: floor(B / N) when wc N >= 1 and ceil(B / N) - 1 when it is slightly below. Look for an
// integer form floor((B + a) M / 2^s) - e (M = ceil(2^s / N), the usual division by a constant)
// that reproduces disk_quantise(wc B) for every possible disk sum B in [0, 255 N]; keep the
// double form otherwise.
void disk_integer_store(DiskPlan& plan, std::int32_t n) {
    const auto bmax = static_cast<std::uint32_t>(255 * n);
    const auto nn = static_cast<std::uint32_t>(n);
    for (const std::uint32_t sub : {0u, 1u}) {
        const std::uint32_t add = sub == 0 ? 0 : nn - 1;
        for (std::uint32_t shift = 16; shift < 32; ++shift) {
            const std::uint64_t mul = ((std::uint64_t{1} << shift) + nn - 1) / nn;
            if ((bmax + add) * mul >= (std::uint64_t{1} << 32)) break;
            bool ok = true;
            for (std::uint32_t b = 0; ok && b <= bmax; ++b) {
                ok = disk_divide(b, add, static_cast<std::uint32_t>(mul), shift, sub) ==
                     disk_quantise(plan.wc * static_cast<double>(b));
            }
            if (ok) {
                plan.div = true;
                plan.div_add = add;
                plan.div_mul = static_cast<std::uint32_t>(mul);
                plan.div_shift = shift;
                plan.div_sub = sub;
                return;
            }
        }
    }
}

std::optional<DiskPlan> plan_disk(const double* k, ptrdiff_t kh, ptrdiff_t kw, const uint8_t* mask,
                                  ptrdiff_t mh, ptrdiff_t mw, const double* g, ptrdiff_t gl) {
    if (gl != 3 || g[0] != g[2] || !(g[0] >= 0.0) || !(g[1] > 0.0) || mh != kh || mw != kw) {
        return std::nullopt;
    }
    if (kh < 2 || kw < 2) return std::nullopt;
    DiskPlan plan;
    // Row half widths (-1: empty row). The mask must be a disk in the sense used by the rings:
    // every row empty or one run centred on the anchor column, widths symmetric in dy and
    // non-increasing in |dy|.
    const ptrdiff_t ry = mh / 2, rx = mw / 2;
    std::vector<ptrdiff_t> width(static_cast<std::size_t>(mh), -1);
    std::int32_t n = 0;
    for (ptrdiff_t i = 0; i < mh; ++i) {
        ptrdiff_t first = -1, last = -1;
        for (ptrdiff_t j = 0; j < mw; ++j) {
            if (!mask[i * mw + j]) continue;
            if (first < 0) first = j;
            if (last >= 0 && last != j - 1) return std::nullopt;  // not one run
            last = j;
            ++n;
        }
        if (first < 0) continue;
        if (first + last != 2 * rx) return std::nullopt;  // not centred
        width[i] = last - rx;
    }
    for (ptrdiff_t dy = 0; dy <= ry; ++dy) {
        if (width[ry + dy] != width[ry - dy]) return std::nullopt;
        if (dy > 0 && width[ry + dy] > width[ry + dy - 1]) return std::nullopt;
    }
    if (n == 0 || 255 * n > 65535) return std::nullopt;
    for (ptrdiff_t dy = ry; dy >= 0; --dy) {  // widths in increasing order
        const ptrdiff_t wj = width[ry + dy];
        const ptrdiff_t prev = plan.rings.empty() ? -1 : plan.rings.back().dx.back();
        if (wj < 0 || wj == prev) continue;
        DiskRing ring;
        ring.h = dy;
        for (ptrdiff_t a = -wj; a <= wj; ++a) {
            if (a > prev || a < -prev) ring.dx.push_back(a);
        }
        plan.rings.push_back(std::move(ring));
    }
    // Frame: the kernel grid plus one tap on each side (where the full Gaussian spreads).
    plan.fh = kh / 2 + 1;
    plan.fw = kw / 2 + 1;
    const ptrdiff_t fkh = kh + 2, fkw = kw + 2;
    const auto at = [fkw](ptrdiff_t i, ptrdiff_t j) { return (i + 1) * fkw + (j + 1); };
    std::vector<std::int32_t> d(static_cast<std::size_t>(fkh * fkw), 0);
    for (ptrdiff_t i = 0; i < kh; ++i) {
        for (ptrdiff_t j = 0; j < kw; ++j) d[at(i, j)] = mask[i * mw + j] ? 1 : 0;
    }
    // J applied along columns (jv: neighbours above and below) or rows (jh: left and right)
    // inside the grid [0, kh) x [0, kw), reflect-101 at its border (kh, kw >= 2).
    const auto j_along = [&](const std::vector<std::int32_t>& a, bool vertical) {
        std::vector<std::int32_t> r(a.size(), 0);
        const ptrdiff_t n_axis = vertical ? kh : kw;
        for (ptrdiff_t i = 0; i < kh; ++i) {
            for (ptrdiff_t j = 0; j < kw; ++j) {
                const ptrdiff_t t = vertical ? i : j;
                const ptrdiff_t lo = t == 0 ? 1 : t - 1, hi = t == n_axis - 1 ? n_axis - 2 : t + 1;
                r[at(i, j)] = vertical ? a[at(lo, j)] + a[at(hi, j)] : a[at(i, lo)] + a[at(i, hi)];
            }
        }
        return r;
    };
    const auto jv = [&](const std::vector<std::int32_t>& a) { return j_along(a, true); };
    const auto jh = [&](const std::vector<std::int32_t>& a) { return j_along(a, false); };
    std::vector<std::int32_t> me = jv(d), mk = jh(jv(d));
    {
        const std::vector<std::int32_t> t = jh(d);
        for (std::size_t p = 0; p < me.size(); ++p) me[p] += t[p];
    }
    // The same without the grid border: plain shifts of D over the whole frame.
    std::vector<std::int32_t> me_full(d.size(), 0), mk_full(d.size(), 0);
    for (ptrdiff_t i = 0; i < fkh; ++i) {
        for (ptrdiff_t j = 0; j < fkw; ++j) {
            const auto dd = [&](ptrdiff_t a, ptrdiff_t b) {
                return (a < 0 || a >= fkh || b < 0 || b >= fkw) ? 0 : d[a * fkw + b];
            };
            me_full[i * fkw + j] = dd(i - 1, j) + dd(i + 1, j) + dd(i, j - 1) + dd(i, j + 1);
            mk_full[i * fkw + j] =
                dd(i - 1, j - 1) + dd(i - 1, j + 1) + dd(i + 1, j - 1) + dd(i + 1, j + 1);
        }
    }
    const double g00 = g[0] * g[0], g01 = g[0] * g[1], g11 = g[1] * g[1];
    double k_sum = 0.0, m_sum = 0.0, kmax = 0.0;
    std::vector<double> model(d.size());
    for (std::size_t p = 0; p < d.size(); ++p) {
        model[p] = (g11 * d[p] + g01 * me[p]) + g00 * mk[p];
        m_sum += model[p];
    }
    for (ptrdiff_t i = 0; i < kh * kw; ++i) {
        k_sum += k[i];
        kmax = std::max(kmax, std::fabs(k[i]));
    }
    if (!(m_sum > 0.0) || !(kmax > 0.0)) return std::nullopt;
    const double c = k_sum / m_sum;
    const double tol = std::ldexp(kmax, kDiskTolExp);
    for (ptrdiff_t i = 0; i < fkh; ++i) {
        for (ptrdiff_t j = 0; j < fkw; ++j) {
            const bool inside = i >= 1 && i <= kh && j >= 1 && j <= kw;
            const double kv = inside ? k[(i - 1) * kw + (j - 1)] : 0.0;
            if (!(std::fabs(kv - c * model[i * fkw + j]) <= tol)) return std::nullopt;
        }
    }
    bool split = true;  // the border corrections (if any) have the split form
    {
        // Ev = Jv D - (rows of D shifted up and down), Eh likewise along columns.
        std::vector<std::int32_t> ev = jv(d), eh = jh(d);
        const auto dd = [&](ptrdiff_t a, ptrdiff_t b) {
            return (a < 0 || a >= fkh || b < 0 || b >= fkw) ? 0 : d[a * fkw + b];
        };
        const auto val = [&](const std::vector<std::int32_t>& m, ptrdiff_t a, ptrdiff_t b) {
            return (a < 0 || a >= fkh || b < 0 || b >= fkw) ? 0 : m[a * fkw + b];
        };
        bool& ok = split;
        for (ptrdiff_t i = 0; i < fkh; ++i) {
            for (ptrdiff_t j = 0; j < fkw; ++j) {
                ev[i * fkw + j] -= dd(i - 1, j) + dd(i + 1, j);
                eh[i * fkw + j] -= dd(i, j - 1) + dd(i, j + 1);
                // Ev is read one column either side of its taps, Eh one row either side: Ev
                // must stay clear of the frame's first and last columns (padding), and the
                // shifted parts must live inside the frame.
                if (ev[i * fkw + j] != 0 && (j == 0 || j == fkw - 1)) ok = false;
                if (eh[i * fkw + j] != 0 && (i == 0 || i == fkh - 1)) ok = false;
            }
        }
        for (ptrdiff_t i = 0; ok && i < fkh; ++i) {
            for (ptrdiff_t j = 0; j < fkw; ++j) {
                const std::int32_t e = val(ev, i, j) + val(eh, i, j);
                const std::int32_t kk = val(ev, i, j - 1) + val(ev, i, j + 1) +
                                        val(eh, i - 1, j) + val(eh, i + 1, j);
                if (e != me[i * fkw + j] - me_full[i * fkw + j] ||
                    kk != mk[i * fkw + j] - mk_full[i * fkw + j]) {
                    ok = false;
                    break;
                }
            }
        }
        if (ok) {
            disk_corrections(ev, std::vector<std::int32_t>(ev.size(), 0), fkw, plan.fh, plan.fw,
                             plan.vert_pos, plan.vert_neg);
            disk_corrections(eh, std::vector<std::int32_t>(eh.size(), 0), fkw, plan.fh, plan.fw,
                             plan.horz_pos, plan.horz_neg);
            for (const DiskTaps* taps :
                 {&plan.vert_pos, &plan.vert_neg, &plan.horz_pos, &plan.horz_neg}) {
                if (taps->size() > 128) split = false;  // int16 tap sums
            }
            if (split) disk_group_corrections(plan);
        }
    }
    plan.wc = c * g11;
    plan.rho = g[0] / g[1];
    // Neighbour weights that move no result by more than 2^-40 of a gray level are folded into
    // the centre weight (alias sigma 0.1 leaves g0 ~ 2e-22).
    double reach = 0.0;
    for (std::size_t p = 0; p < d.size(); ++p) {
        reach += std::abs(me[p]) * std::fabs(c * g01) + std::abs(mk[p]) * std::fabs(c * g00);
    }
    plan.gauss = !(reach * 255.0 < std::ldexp(1.0, -40));
    if (plan.gauss && !split) return std::nullopt;
    if (plan.gauss) {
        // Magnitude bound of the float32 terms, in gray levels: wc times the disk, edge and
        // corner tap counts (the correction taps counted by absolute value, the corner ones
        // twice: Mk's corrections are the edge ones shifted either way), times 255. The
        // evaluation makes at most 12 roundings of 2^-24 relative on terms of that total.
        std::int64_t n_corr = 0;
        for (const DiskTaps* taps :
             {&plan.vert_pos, &plan.vert_neg, &plan.horz_pos, &plan.horz_neg}) {
            n_corr += static_cast<std::int64_t>(taps->size());
        }
        std::int64_t e_full = 0, k_full = 0;
        for (std::size_t p = 0; p < d.size(); ++p) {
            e_full += me_full[p];
            k_full += mk_full[p];
        }
        const double rho = plan.rho;
        const double mag = 255.0 * plan.wc *
                           (static_cast<double>(n) + rho * static_cast<double>(e_full + n_corr) +
                            rho * rho * static_cast<double>(k_full + 2 * n_corr));
        plan.near = static_cast<float>(
            std::max(std::ldexp(1.0, -11), 2.0 * 12.0 * std::ldexp(mag, -24)));
        // The tiny pre-decision. With Me and Mk non-negative, E and C are sums of pixels with
        // non-negative weights: 0 <= E <= 255 sum(Me), 0 <= C <= 255 sum(Mk) (the split form
        // evaluates these same integers), so the plan's value, wc (B + rho (E + rho C)) in
        // double, lies in [wc B - d, wc B + T + d] with T = wc rho 255 (sum(Me) + rho
        // sum(Mk)) and d = 2^-30 covering its five double roundings (each below 2^-44 at
        // values under 2^9). fl(B wcf) differs from wc B by at most B |wcf - wc| + 2^-24 * 2^9
        // (one float32 rounding; B <= 255 N, wc B < 2^9 by the gain check). The float32
        // additions -lo and +hi round by at most half an ulp below 2^9, 2^-16, added to both
        // margins (the FMA variants fuse the product and the addition: one rounding fewer).
        // When hi + lo is well below 1 / N (the spacing of wc B), only disk sums next
        // to a multiple of N reach the double evaluation.
        std::int64_t e_tot = 0, k_tot = 0;
        for (std::size_t p = 0; p < d.size(); ++p) {
            e_tot += me[p];
            k_tot += mk[p];
        }
        const float wcf = static_cast<float>(plan.wc);
        const double bmax = 255.0 * static_cast<double>(n);
        const double t_max = plan.wc * rho * 255.0 *
                             (static_cast<double>(e_tot) + rho * static_cast<double>(k_tot));
        const double lo = bmax * std::fabs(static_cast<double>(wcf) - plan.wc) +
                          std::ldexp(1.0, -15) + std::ldexp(1.0, -16) + std::ldexp(1.0, -30);
        const double hi = t_max + lo;
        if (bmax * plan.wc < 512.0 && hi + lo < 0.75 / static_cast<double>(n)) {
            plan.tiny = true;
            plan.tiny_wc = wcf;
            // Rounded up to float32, so the margins only grow.
            plan.tiny_lo = std::nextafter(static_cast<float>(lo), 1.0f);
            plan.tiny_hi = std::nextafter(static_cast<float>(hi), 1.0f);
        }
    }
    if (!plan.gauss) {
        plan.wc = k_sum / static_cast<double>(n);
        plan.rho = 0.0;
        plan.vert_pos.clear();
        plan.vert_neg.clear();
        plan.horz_pos.clear();
        plan.horz_neg.clear();
        plan.eh_runs.clear();
        plan.eh_pos.clear();
        plan.eh_neg.clear();
        plan.ev_spans.clear();
        plan.ev_pos.clear();
        plan.ev_neg.clear();
        disk_integer_store(plan, n);
    }
    return plan;
}

// Scratch buffers reused by the calls of one thread (no allocation per call once warm).
struct DiskScratch {
    std::vector<uint8_t> padded, planes;
    std::vector<std::uint16_t> d, b;          // ring sums; Gaussian plans: B ring
    std::vector<std::int32_t> ev;              // Gaussian plans: Ev of the output row
    std::vector<std::uint16_t> runs, spans;    // Eh running sums, rings of Ev span sums
    std::vector<float> eh;                     // Gaussian plans: ring of Eh rows, as float
    std::vector<float> v;                      // Gaussian plans: V of the output row
    std::vector<std::int32_t> redo;            // Gaussian plans: vectors to redo in double
    std::vector<uint8_t> stage;                // Gaussian plans: output of a partial strip
};

// The one scratch of the calling thread, shared by every variant and plan kind of the disk
// filter: one padded copy of the image and one set of rings whatever the level, so that a run
// alternating between kernels keeps a single copy of each in cache. disk_filter_planes holds
// `planes` across its calls of the body, which must therefore never resize that member.
DiskScratch& disk_scratch() {
    static thread_local DiskScratch scratch;
    return scratch;
}

// At least n elements of v, starting at a 64-byte boundary: the rings are read and written in
// 64-byte vectors, and one that straddles two cache lines costs two accesses (std::vector's
// storage is only aligned as malloc's, 16 bytes, so the cost varied from process to process).
template <class T>
T* sized(std::vector<T>& v, ptrdiff_t n) {
    static_assert(64 % sizeof(T) == 0, "elements must tile a cache line");
    constexpr ptrdiff_t slack = 64 / sizeof(T);
    if (static_cast<ptrdiff_t>(v.size()) < n + slack) {
        v.resize(static_cast<std::size_t>(n + slack));
    }
    const auto a = reinterpret_cast<std::uintptr_t>(v.data());
    return v.data() + ((64 - a % 64) % 64) / sizeof(T);
}

// Reflect-101 padding of the whole image by fw pixels left and right into `padded` (h rows of
// (w + 2 fw) c samples): the source pixel of every padded column, then one copy per row.
// RGB border pixels move as 4-byte words rather than byte by byte: radius 4 without the
// Gaussian (224 px) took 36-41 us with the byte loop, and about 4 us less with the words.
MMC_INLINE void disk_pad_image(const uint8_t* src, const Shape& s, ptrdiff_t fw,
                               uint8_t* padded) {
    const ptrdiff_t c = s.c, w = s.w, row = s.row(), wp = w + 2 * fw, lp = wp * c;
    std::vector<ptrdiff_t> xmap(static_cast<std::size_t>(wp));
    bool word = c == 3;  // RGB: each pixel moved as one 4-byte word (see below)
    for (ptrdiff_t xp = 0; xp < wp; ++xp) {
        xmap[xp] = reflect101_index(xp - fw, w) * c;
        if (xp < fw || xp >= fw + w) word = word && xmap[xp] + 4 <= row;
    }
    for (ptrdiff_t y = 0; y < s.h; ++y) {
        const uint8_t* in = src + y * row;
        uint8_t* out = padded + y * lp;
        if (word) {
            // A pixel's 4-byte word writes one byte past it, into the next pixel (written
            // next), the first interior byte (copied below) or, after the right border, the
            // next row's first byte (written with that row) or the slack after the rows; the
            // reads stay within the row (checked above).
            for (ptrdiff_t xp = 0; xp < fw; ++xp) std::memcpy(out + xp * 3, in + xmap[xp], 4);
            std::memcpy(out + fw * 3, in, static_cast<std::size_t>(row));
            for (ptrdiff_t xp = fw + w; xp < wp; ++xp) {
                std::memcpy(out + xp * 3, in + xmap[xp], 4);
            }
            continue;
        }
        for (ptrdiff_t xp = 0; xp < fw; ++xp) {
            for (ptrdiff_t ch = 0; ch < c; ++ch) out[xp * c + ch] = in[xmap[xp] + ch];
        }
        std::copy(in, in + row, out + fw * c);
        for (ptrdiff_t xp = fw + w; xp < wp; ++xp) {
            for (ptrdiff_t ch = 0; ch < c; ++ch) out[xp * c + ch] = in[xmap[xp] + ch];
        }
    }
}

// The padded row (row length lp) of every row index yv in [-reach, h + reach) (reflect-101), at
// position yv + reach.
MMC_INLINE std::vector<const uint8_t*> disk_row_map(const uint8_t* padded, ptrdiff_t h,
                                                    ptrdiff_t lp, ptrdiff_t reach) {
    std::vector<const uint8_t*> rows_at(static_cast<std::size_t>(h + 2 * reach));
    for (ptrdiff_t yv = -reach; yv < h + reach; ++yv) {
        rows_at[yv + reach] = padded + reflect101_index(yv, h) * lp;
    }
    return rows_at;
}

// Strip evaluation. The image is cut into vertical strips of 16 NV samples (interleaved
// channels, as stored) and every strip is swept from top to bottom: the disk sums B of the
// strip stay in registers, the ring sums D_j of the strip sit in ring buffers of 2 h_j + 1 rows
// (the row leaving B(y) takes the slot the row entering frees; under 20 KB at radius 8, within
// L1), and each output row is stored as soon as B (Gaussian-free plans) or B of the next row
// (Gaussian plans) is known. Vectors are GCC's generic vectors plus a few per-variant
// primitives: the integer sums run on 32 uint16 lanes (one 512-bit register with AVX-512), the
// float32 steps on 16 lanes. For one and three channels the Gaussian plans are compiled with
// the channel count fixed, so the neighbours x -+ 1 of a row come from register shuffles
// rather than from a row stored and read back. Integer steps are exact; the float32 and double
// steps are the same operations in the same order in every variant (no contraction), so all
// variants agree. Measured at 224 px (RGB, one thread), against the row-pass form this
// replaced: 130 vs 177 us at (radius, alias) = (6, .3), 255 vs 330 us at (8, .5); against
// 16-lane integer sums and generic widening (the previous strip form, same run, one image):
// 61 -> 52, 127 -> 102, 117 -> 90, 172 -> 144, 252 -> 208 us for the five dermamnist levels.
constexpr ptrdiff_t kDiskMaxChannels = 8;  // wider images are filtered one channel at a time
// Vectors of 16 samples per strip: Gaussian-free plans 4; Gaussian plans 8 (128 lanes, 112
// outputs; 10 measured slower with AVX-512, 6 slower with AVX2). With the 32-lane integer sums,
// 8 for the Gaussian-free plans and 12 for the Gaussian ones measured no faster.
constexpr int kDiskFreeVecs = 4, kDiskGaussVecs = 8;
// Gaussian plans without border corrections redo the vectors float32 cannot decide in blocks of
// kDiskDeferRows output rows of a strip, keeping B in a ring of kDiskDeferRing rows (at least
// kDiskDeferRows + 3: rows y0 - 1 .. y0 + kDiskDeferRows + 1 of a block at y0 are live when
// it is redone); a power of two, so a slot is a mask. Images up to kDiskDeferRows rows (every
// MedMNIST size) make one block per strip. Scratch held for the whole strip grew with the
// height: a 2,000,000 x 9 gray image peaked at 1,053 MB against 260 MB before deferring.
constexpr ptrdiff_t kDiskDeferRows = 256, kDiskDeferRing = 512;
static_assert((kDiskDeferRing & (kDiskDeferRing - 1)) == 0 &&
                  (kDiskDeferRows & (kDiskDeferRows - 1)) == 0 &&
                  kDiskDeferRing >= kDiskDeferRows + 3,
              "the deferred rows' slots are masks and must not overlap");

namespace dv {
typedef std::uint8_t u8x16 __attribute__((vector_size(16)));
typedef std::uint8_t u8x32 __attribute__((vector_size(32)));
typedef std::uint16_t u16x16 __attribute__((vector_size(32)));
typedef std::uint16_t u16x32 __attribute__((vector_size(64)));
typedef std::int16_t i16x16 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
typedef double f64x8 __attribute__((vector_size(64)));
typedef std::int32_t i32x16 __attribute__((vector_size(64)));
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
// Halves of a 16-lane vector, and the vector from its halves (register shuffles: copying
// through memory would stall on store forwarding where the variant splits the vector).
MMC_INLINE i32x8 low(i32x16 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
MMC_INLINE i32x8 high(i32x16 v) {
    return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}
MMC_INLINE i32x16 join(i32x8 a, i32x8 b) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
MMC_INLINE u16x16 low(u16x32 v) {
    return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
MMC_INLINE u16x16 high(u16x32 v) {
    return __builtin_shufflevector(v, v, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
                                   30, 31);
}
MMC_INLINE u16x32 join(u16x16 a, u16x16 b) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                   17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}
}  // namespace dv

template <class V>
MMC_INLINE V disk_load(const void* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class V>
MMC_INLINE void disk_store(void* p, const V& v) {
    std::memcpy(p, &v, sizeof v);
}

// Primitives whose generic-vector forms GCC 12 lowers poorly (byte and uint16 / int16
// widening, which it splits into halves; float compares), written once per dispatch variant;
// all three compute the same values.
struct DiskIsaBase {
    static MMC_INLINE bool any(dv::i32x16 v) {
        std::int32_t r = 0;
        for (int l = 0; l < 16; ++l) r |= v[l];
        return r != 0;
    }
    static MMC_INLINE dv::u16x32 widen(const uint8_t* p) {
        return __builtin_convertvector(disk_load<dv::u8x32>(p), dv::u16x32);
    }
    // The low / high 16 lanes of a 32-lane vector, widened to int32.
    static MMC_INLINE dv::i32x16 widen_low(dv::u16x32 v) {
        return __builtin_convertvector(dv::low(v), dv::i32x16);
    }
    static MMC_INLINE dv::i32x16 widen_high(dv::u16x32 v) {
        return __builtin_convertvector(dv::high(v), dv::i32x16);
    }
    // The low / high 16 lanes of a 32-lane vector read as int16, widened to int32.
    static MMC_INLINE dv::i32x16 s16_low(dv::u16x32 v) {
        return __builtin_convertvector((dv::i16x16)dv::low(v), dv::i32x16);
    }
    static MMC_INLINE dv::i32x16 s16_high(dv::u16x32 v) {
        return __builtin_convertvector((dv::i16x16)dv::high(v), dv::i32x16);
    }
    // 16 uint16 / int16 samples widened to int32.
    static MMC_INLINE dv::i32x16 u16(const std::uint16_t* p) {
        return __builtin_convertvector(disk_load<dv::u16x16>(p), dv::i32x16);
    }
    static MMC_INLINE dv::i32x16 s16(const std::uint16_t* p) {
        return __builtin_convertvector(disk_load<dv::i16x16>(p), dv::i32x16);
    }
    // a * b + c for the float32 pre-decision, whose error bound allows two roundings; the
    // variants with FMA round once (the decided results are the same: see disk_filter_body).
    static MMC_INLINE dv::f32x16 fmadd(dv::f32x16 a, dv::f32x16 b, dv::f32x16 c) {
        return a * b + c;
    }
    // 16 bytes widened to int32.
    static MMC_INLINE dv::i32x16 u8(const uint8_t* p) {
        return __builtin_convertvector(disk_load<dv::u8x16>(p), dv::i32x16);
    }
    // Clamp to [0, 255] and narrow to bytes.
    static MMC_INLINE dv::u8x16 bytes(dv::i32x16 q) {
        q = q < 0 ? 0 : q;
        q = q > 255 ? 255 : q;
        return __builtin_convertvector(q, dv::u8x16);
    }
};

#if MMC_DISK_DISPATCH
#define MMC_AVX2_INLINE inline __attribute__((target("avx2,fma")))
#define MMC_AVX512_INLINE \
    inline __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512dq")))
struct DiskIsaAvx2 {
    static MMC_AVX2_INLINE bool any(dv::i32x16 v) {
        const __m256i o = _mm256_or_si256((__m256i)dv::low(v), (__m256i)dv::high(v));
        return !_mm256_testz_si256(o, o);
    }
    static MMC_AVX2_INLINE dv::u16x32 widen(const uint8_t* p) {
        const auto* q = reinterpret_cast<const __m128i*>(p);
        return dv::join((dv::u16x16)_mm256_cvtepu8_epi16(_mm_loadu_si128(q)),
                        (dv::u16x16)_mm256_cvtepu8_epi16(_mm_loadu_si128(q + 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 widen_low(dv::u16x32 v) {
        const __m256i h = (__m256i)dv::low(v);
        return dv::join((dv::i32x8)_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)),
                        (dv::i32x8)_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 widen_high(dv::u16x32 v) {
        const __m256i h = (__m256i)dv::high(v);
        return dv::join((dv::i32x8)_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)),
                        (dv::i32x8)_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 s16_low(dv::u16x32 v) {
        const __m256i h = (__m256i)dv::low(v);
        return dv::join((dv::i32x8)_mm256_cvtepi16_epi32(_mm256_castsi256_si128(h)),
                        (dv::i32x8)_mm256_cvtepi16_epi32(_mm256_extracti128_si256(h, 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 s16_high(dv::u16x32 v) {
        const __m256i h = (__m256i)dv::high(v);
        return dv::join((dv::i32x8)_mm256_cvtepi16_epi32(_mm256_castsi256_si128(h)),
                        (dv::i32x8)_mm256_cvtepi16_epi32(_mm256_extracti128_si256(h, 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 u16(const std::uint16_t* p) {
        const auto* q = reinterpret_cast<const __m128i*>(p);
        return dv::join((dv::i32x8)_mm256_cvtepu16_epi32(_mm_loadu_si128(q)),
                        (dv::i32x8)_mm256_cvtepu16_epi32(_mm_loadu_si128(q + 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 s16(const std::uint16_t* p) {
        const auto* q = reinterpret_cast<const __m128i*>(p);
        return dv::join((dv::i32x8)_mm256_cvtepi16_epi32(_mm_loadu_si128(q)),
                        (dv::i32x8)_mm256_cvtepi16_epi32(_mm_loadu_si128(q + 1)));
    }
    static MMC_AVX2_INLINE dv::i32x16 u8(const uint8_t* p) {
        const auto* q = reinterpret_cast<const __m128i*>(p);
        return dv::join((dv::i32x8)_mm256_cvtepu8_epi32(_mm_loadl_epi64(q)),
                        (dv::i32x8)_mm256_cvtepu8_epi32(
                            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))));
    }
    static MMC_AVX2_INLINE dv::f32x16 fmadd(dv::f32x16 a, dv::f32x16 b, dv::f32x16 c) {
        using dv::high, dv::low;
        const auto ai = (dv::i32x16)a, bi = (dv::i32x16)b, ci = (dv::i32x16)c;
        return (dv::f32x16)dv::join(
            (dv::i32x8)_mm256_fmadd_ps((__m256)low(ai), (__m256)low(bi), (__m256)low(ci)),
            (dv::i32x8)_mm256_fmadd_ps((__m256)high(ai), (__m256)high(bi), (__m256)high(ci)));
    }
    static MMC_AVX2_INLINE dv::u8x16 bytes(dv::i32x16 q) {
        const __m256i lo = (__m256i)dv::low(q), hi = (__m256i)dv::high(q);
        const __m256i top = _mm256_set1_epi32(255);
        // min 255, then unsigned saturation (negative -> 0) to 16 and to 8 bits.
        __m256i t = _mm256_packus_epi32(_mm256_min_epi32(lo, top), _mm256_min_epi32(hi, top));
        t = _mm256_permute4x64_epi64(t, 0xD8);
        t = _mm256_packus_epi16(t, t);
        return (dv::u8x16)_mm_unpacklo_epi64(_mm256_castsi256_si128(t),
                                             _mm256_extracti128_si256(t, 1));
    }
};
struct DiskIsaAvx512 {
    static MMC_AVX512_INLINE bool any(dv::i32x16 v) {
        return _mm512_test_epi32_mask((__m512i)v, (__m512i)v) != 0;
    }
    static MMC_AVX512_INLINE dv::u16x32 widen(const uint8_t* p) {
        return (dv::u16x32)_mm512_cvtepu8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static MMC_AVX512_INLINE dv::i32x16 widen_low(dv::u16x32 v) {
        return (dv::i32x16)_mm512_cvtepu16_epi32(_mm512_castsi512_si256((__m512i)v));
    }
    static MMC_AVX512_INLINE dv::i32x16 widen_high(dv::u16x32 v) {
        return (dv::i32x16)_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64((__m512i)v, 1));
    }
    static MMC_AVX512_INLINE dv::i32x16 s16_low(dv::u16x32 v) {
        return (dv::i32x16)_mm512_cvtepi16_epi32(_mm512_castsi512_si256((__m512i)v));
    }
    static MMC_AVX512_INLINE dv::i32x16 s16_high(dv::u16x32 v) {
        return (dv::i32x16)_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64((__m512i)v, 1));
    }
    static MMC_AVX512_INLINE dv::i32x16 u16(const std::uint16_t* p) {
        return (dv::i32x16)_mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static MMC_AVX512_INLINE dv::i32x16 s16(const std::uint16_t* p) {
        return (dv::i32x16)_mm512_cvtepi16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static MMC_AVX512_INLINE dv::i32x16 u8(const uint8_t* p) {
        return (dv::i32x16)_mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static MMC_AVX512_INLINE dv::f32x16 fmadd(dv::f32x16 a, dv::f32x16 b, dv::f32x16 c) {
        return (dv::f32x16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
    }
    static MMC_AVX512_INLINE dv::u8x16 bytes(dv::i32x16 q) {
        return (dv::u8x16)_mm512_cvtusepi32_epi8(_mm512_max_epi32((__m512i)q, _mm512_setzero_si512()));
    }
};
#endif

// Per-call layout of the ring sums and correction taps (byte offsets for this channel count).
struct DiskRingRt {
    ptrdiff_t h = 0, slots = 0, slot = 0;
    const ptrdiff_t* off = nullptr;  // dx * c of the ring's columns
    ptrdiff_t n = 0;
    std::uint16_t* buf = nullptr;    // slots x strip lanes
};

// Sum of the listed columns of one padded row (p at the strip's first sample), modulo 2^16.
template <class Isa, int NI>
MMC_INLINE void disk_ring_sum(dv::u16x32 (&d)[NI], const uint8_t* p, const ptrdiff_t* off,
                              ptrdiff_t n) {
    for (int v = 0; v < NI; ++v) d[v] = Isa::widen(p + off[0] + 32 * v);
    for (ptrdiff_t t = 1; t < n; ++t) {
        const uint8_t* q = p + off[t];
        for (int v = 0; v < NI; ++v) d[v] += Isa::widen(q + 32 * v);
    }
}

// A correction tap of a strip: row offset and sample offset (dx * c) from the strip's lane.
struct DiskTapOff {
    ptrdiff_t dy, dxc;
};

// a = sum of the pos taps - sum of the neg taps around row y (rows: padded row of every row
// index; pb: padded sample of lane 0), over NI vectors of 32 lanes, modulo 2^16: an int16 sum
// (the plan keeps both lists at most 128 taps).
template <class Isa, int NI>
MMC_INLINE void disk_tap_sum(dv::u16x32 (&a)[NI], const uint8_t* const* rows, ptrdiff_t y,
                             ptrdiff_t pb, const DiskTapOff* pos, ptrdiff_t npos,
                             const DiskTapOff* neg, ptrdiff_t nneg) {
    for (int v = 0; v < NI; ++v) a[v] = dv::u16x32{};
    for (ptrdiff_t t = 0; t < npos; ++t) {
        const uint8_t* p = rows[y + pos[t].dy] + pb + pos[t].dxc;
        for (int v = 0; v < NI; ++v) a[v] += Isa::widen(p + 32 * v);
    }
    for (ptrdiff_t t = 0; t < nneg; ++t) {
        const uint8_t* p = rows[y + neg[t].dy] + pb + neg[t].dxc;
        for (int v = 0; v < NI; ++v) a[v] -= Isa::widen(p + 32 * v);
    }
}


// Testing aid (_set_disk_double): every vector of Gaussian plans takes the double evaluation,
// so tests can compare the float32 decisions with it byte for byte.
bool disk_force_double = false;

// Lanes Off .. Off + 15 of the 32 lanes (a, b): a window of two consecutive vectors.
template <int Off, std::size_t... K>
MMC_INLINE dv::f32x16 disk_window(dv::f32x16 a, dv::f32x16 b, std::index_sequence<K...>) {
    return __builtin_shufflevector(a, b, (Off + static_cast<int>(K))...);
}
template <int Off>
MMC_INLINE dv::f32x16 disk_window(dv::f32x16 a, dv::f32x16 b) {
    return disk_window<Off>(a, b, std::make_index_sequence<16>{});
}

// The rings of the disk x^2 + y^2 <= R^2 (integer R >= 1; the reference's disk() at the
// MedMNIST-C tables' radii, 224 px) at compile time, as plan_disk builds them: ring j holds the
// columns w[j - 1] < |dx| <= w[j] (w[-1] = -1) on the rows |dy| <= h[j].
template <int R>
struct DiskShape {
    static constexpr int half_width(int dy) {
        int w = 0;
        while ((w + 1) * (w + 1) + dy * dy <= R * R) ++w;
        return w;
    }
    struct Rings {
        int m = 0, w[R + 1] = {}, h[R + 1] = {};
    };
    static constexpr Rings make() {
        Rings r{};
        int prev = -1;
        for (int dy = R; dy >= 0; --dy) {
            const int wj = half_width(dy);
            if (wj == prev) continue;
            r.w[r.m] = wj;
            r.h[r.m] = dy;
            ++r.m;
            prev = wj;
        }
        return r;
    }
    static constexpr Rings rings = make();
    static constexpr int m = rings.m;
};
constexpr int kDiskMaxShape = 8;  // disk_shape_of tries radii 1 .. 8

// Calls f(integral_constant<int, j>) for j = 0, 1, ...: a loop unrolled at compile time.
template <class F, std::size_t... J>
MMC_INLINE void disk_for_rings(F&& f, std::index_sequence<J...>) {
    (f(std::integral_constant<int, static_cast<int>(J)>{}), ...);
}

// disk_ring_sum for the ring W0 < |dx| <= W1 of a compiled shape, C samples a pixel: the
// column offsets are constants.
template <class Isa, int NI, int C, int W0, int W1>
MMC_INLINE void disk_ring_sum_ct(dv::u16x32 (&d)[NI], const uint8_t* p) {
#pragma GCC unroll 16
    for (int v = 0; v < NI; ++v) {
        dv::u16x32 a = W0 < 0 ? Isa::widen(p + 32 * v) : dv::u16x32{};
#pragma GCC unroll 16
        for (int dx = (W0 < 0 ? 1 : W0 + 1); dx <= W1; ++dx) {
            a += Isa::widen(p - dx * C + 32 * v) + Isa::widen(p + dx * C + 32 * v);
        }
        d[v] = a;
    }
}

// The radius R in 1 .. kDiskMaxShape whose compiled shape has the plan's rings, else 0.
template <int R = 1>
int disk_shape_of(const DiskPlan& plan) {
    if constexpr (R > kDiskMaxShape) {
        return 0;
    } else {
        using S = DiskShape<R>;
        bool same = static_cast<int>(plan.rings.size()) == S::m;
        for (int j = 0; same && j < S::m; ++j) {
            same = plan.rings[j].h == S::rings.h[j] && plan.rings[j].dx.back() == S::rings.w[j];
        }
        return same ? R : disk_shape_of<R + 1>(plan);
    }
}

// CT: the channel count when fixed at compile time (Gaussian plans then take the neighbours
// x -+ 1 from registers), 0 when read from s.
// RS: the radius of the ring shape compiled in (DiskShape; it must be the plan's), 0 when the
// rings are read from the plan.
template <class Isa, int NV, bool Gauss, bool Corr, int CT, int RS>
MMC_INLINE void disk_filter_body(const uint8_t* src, uint8_t* dst, const Shape& s,
                                 const DiskPlan& plan) {
    using namespace dv;
    static_assert(CT >= 0 && CT <= 8, "neighbours must lie within the guard lanes");
    DiskScratch& scratch = disk_scratch();
    const ptrdiff_t c = CT > 0 ? CT : s.c, w = s.w, h = s.h, row = s.row();
    constexpr ptrdiff_t SW = 16 * NV;     // strip lanes
    static_assert(NV % 2 == 0, "integer sums run on 32-lane vectors");
    constexpr int NI = NV / 2;             // 32-lane vectors of the integer sums
    constexpr ptrdiff_t G = Gauss ? 8 : 0;  // guard lanes each side (neighbours x -+ 1, c <= 8)
    const ptrdiff_t L = SW - 2 * G;       // output samples per strip
    const ptrdiff_t lp = (w + 2 * plan.fw) * c;  // padded row
    // Slack before and after the padded rows: the guard lanes left of the first strip (up to
    // G - c samples before padded row 0) and the lanes past the last strip's outputs read
    // there (results discarded).
    const ptrdiff_t front = 64 + 2 * plan.fw * c, back = 2 * SW + 2 * plan.fw * c + 64;
    uint8_t* padded = sized(scratch.padded, front + h * lp + back) + front;
    disk_pad_image(src, s, plan.fw, padded);
    const ptrdiff_t reach = plan.fh + 4;
    const std::vector<const uint8_t*> rows_at = disk_row_map(padded, h, lp, reach);
    const uint8_t* const* rows_base = rows_at.data() + reach;
    auto prow = [rows_base](ptrdiff_t yv) MMC_LAMBDA_INLINE { return rows_base[yv]; };
    // Rings: column offsets and ring buffers of 2 h_j + 1 strip rows.
    const auto nr = static_cast<ptrdiff_t>(plan.rings.size());
    std::vector<ptrdiff_t> offs;
    std::vector<DiskRingRt> rings(static_cast<std::size_t>(nr));
    {
        ptrdiff_t slots = 0;
        for (const DiskRing& ring : plan.rings) {
            for (const ptrdiff_t dx : ring.dx) offs.push_back(dx * c);
            slots += 2 * ring.h + 1;
        }
        std::uint16_t* d = sized(scratch.d, slots * SW);
        ptrdiff_t o = 0;
        for (ptrdiff_t j = 0; j < nr; ++j) {
            DiskRingRt& r = rings[j];
            r.h = plan.rings[j].h;
            r.slots = 2 * r.h + 1;
            r.off = offs.data() + o;
            r.n = static_cast<ptrdiff_t>(plan.rings[j].dx.size());
            r.buf = d;
            o += r.n;
            d += r.slots * SW;
        }
    }
    // B(y0) of the strip whose lane 0 is at pb in the padded rows, filling the buffers.
    auto start = [&](u16x32 (&b)[NI], ptrdiff_t y0, ptrdiff_t pb) MMC_LAMBDA_INLINE {
        for (int v = 0; v < NI; ++v) b[v] = u16x32{};
        for (DiskRingRt& r : rings) {
            r.slot = 0;
            for (ptrdiff_t dy = -r.h; dy <= r.h; ++dy) {
                u16x32 d[NI];
                disk_ring_sum<Isa, NI>(d, prow(y0 + dy) + pb, r.off, r.n);
                std::uint16_t* slot = r.buf + (dy + r.h) * SW;
                for (int v = 0; v < NI; ++v) {
                    b[v] += d[v];
                    disk_store(slot + 32 * v, d[v]);
                }
            }
        }
    };
    // B(y - 1) -> B(y): the row entering ring j (y + h_j) takes the slot of the row leaving it
    // (y - 1 - h_j).
    // d, ring r's sum over the row entering it, replaces the row leaving it in B and in the
    // ring buffer (that row's slot).
    auto rotate = [&](u16x32 (&b)[NI], DiskRingRt& r, const u16x32 (&d)[NI]) MMC_LAMBDA_INLINE {
        std::uint16_t* slot = r.buf + r.slot * SW;
        for (int v = 0; v < NI; ++v) {
            b[v] += d[v] - disk_load<u16x32>(slot + 32 * v);
            disk_store(slot + 32 * v, d[v]);
        }
        if (++r.slot == r.slots) r.slot = 0;
    };
    auto advance = [&](u16x32 (&b)[NI], ptrdiff_t y, ptrdiff_t pb) MMC_LAMBDA_INLINE {
        if constexpr (RS > 0) {
            using S = DiskShape<RS>;
            disk_for_rings([&](auto jc) MMC_LAMBDA_INLINE {
                constexpr int j = decltype(jc)::value;
                constexpr int w0 = j > 0 ? S::rings.w[j > 0 ? j - 1 : 0] : -1;
                u16x32 d[NI];
                disk_ring_sum_ct<Isa, NI, CT, w0, S::rings.w[j]>(d, prow(y + S::rings.h[j]) + pb);
                rotate(b, rings[j], d);
            }, std::make_index_sequence<static_cast<std::size_t>(S::m)>{});
        } else {
            for (DiskRingRt& r : rings) {
                u16x32 d[NI];
                disk_ring_sum<Isa, NI>(d, prow(y + r.h) + pb, r.off, r.n);
                rotate(b, r, d);
            }
        }
    };
    // Output row y of the strip at s0: written straight to dst when the strip is whole (staging
    // it in a buffer read back as one vector stalls on store forwarding), else into obuf, which
    // row_done copies to dst.
    alignas(64) uint8_t obuf[SW];
    auto row_out = [&](ptrdiff_t y, ptrdiff_t s0, ptrdiff_t n_out) MMC_LAMBDA_INLINE {
        return n_out == L ? dst + y * row + s0 : obuf;
    };
    auto row_done = [&](ptrdiff_t y, ptrdiff_t s0, ptrdiff_t n_out) MMC_LAMBDA_INLINE {
        if (n_out < L) std::memcpy(dst + y * row + s0, obuf, static_cast<std::size_t>(n_out));
    };
    if constexpr (!Gauss) {
        const u32x16 add = plan.div_add + u32x16{}, mul = plan.div_mul + u32x16{};
        // A uniform shift: a per-lane one is scalarised in the AVX2 variant.
        const unsigned shift = plan.div_shift;
        const i32x16 sub = static_cast<std::int32_t>(plan.div_sub) + i32x16{};
        for (ptrdiff_t s0 = 0; s0 < row; s0 += L) {
            const ptrdiff_t pb = plan.fw * c + s0;  // strip lane 0 = output sample s0
            const ptrdiff_t n_out = std::min(L, row - s0);
            u16x32 b[NI];
            start(b, 0, pb);
            for (ptrdiff_t y = 0; y < h; ++y) {
                if (y > 0) advance(b, y, pb);
                uint8_t* o = row_out(y, s0, n_out);
                if (plan.div) {
                    for (int v = 0; v < NV; ++v) {
                        const u32x16 bv = (u32x16)(v % 2 ? Isa::widen_high(b[v / 2])
                                                         : Isa::widen_low(b[v / 2]));
                        const u32x16 q = ((bv + add) * mul) >> shift;
                        disk_store(o + 16 * v, Isa::bytes((i32x16)q - sub));
                    }
                } else {
                    alignas(64) std::uint16_t tmp[SW];
                    for (int v = 0; v < NI; ++v) disk_store(tmp + 32 * v, b[v]);
                    for (ptrdiff_t i = 0; i < L; ++i) {
                        o[i] = disk_quantise(plan.wc * static_cast<double>(tmp[i]));
                    }
                }
                row_done(y, s0, n_out);
            }
        }
        return;
    } else {
        // Gaussian plans. Output row y needs B(y - 1), B(y), B(y + 1) at its lanes and their
        // neighbours x -+ 1 (c lanes away): the strip computes B over SW lanes starting G = 8
        // lanes left of its first output (16 (NV - 1) outputs a strip), and keeps the last four
        // rows of B and of the horizontal border corrections Eh (as float32, exact: small
        // integers) in rings (row yv in slot yv & 3); row y is made once B(y + 2) is known (its
        // slots are no longer in flight). The corrections are summed as the plan groups them
        // (disk_group_corrections): Eh's vertical runs as running sums updated by one entering
        // and one leaving row, Ev's recurring spans once per image row into a ring (read from
        // the disk rings' buffers where those hold the row), single taps directly.
        // Separably,
        //     U = B(y - 1) + B(y + 1) [+ Ev(y)],  V = B(y) + rho U,
        //     r = wc (V(x) + rho (V(x - 1) + V(x + 1) [+ Eh(y) + rho (Eh(y -+ 1))])),
        // which is the plan's value wc (B + rho (E + rho C)), here in float32. Its error: the
        // integer sums convert exactly (below 2^24), then at most 12 roundings of 2^-24
        // relative each (the float32 rho and wc included) on terms whose magnitudes sum to at
        // most the plan's bound M (below 2^8.1 levels for every defocus kernel, whose gain is
        // about 1), so |r - exact| < 12 2^-24 M (fewer roundings where Isa::fmadd fuses).
        // When trunc(r -+ near) agree (plan.near: twice that bound, at least 2^-11), the exact
        // value lies in the same unit interval and r's truncation is the plan's. Otherwise the
        // 16 lanes are recomputed in double exactly as the plan's B + rho (E + rho C) from the
        // integer E and C, so every output equals the plan's double evaluation. Measured on
        // the sample images: about 2 % of vectors take that path for alias sigma >= .3, and on
        // flat regions (the kernel's sum, 1 -+ 6e-8 for most tables, puts every result next to
        // an integer). For alias .2 (rho
        // ~ 4e-6, so r ~ B / N, an integer for one disk sum in N) 13-27 % of vectors did; such
        // plans are "tiny": each vector is first decided from B alone (plan.tiny_*), and the
        // vectors that cannot be go straight to the double evaluation. Measured at 224 px (RGB,
        // one thread, A/B in one process, min of 30): (5, .2) 111 -> 88 us; the grouped
        // corrections (7, .4) 147 -> 138 us, (8, .5) 203 -> 181 us.
        // Plans without border corrections keep B of the rows of a block of kDiskDeferRows
        // output rows (the whole strip for images up to that height) and redo the vectors
        // float32 cannot decide in double after the block's last row (Defer), listed without
        // a branch; the others redo them at once, from rings of the last four
        // rows. Which vectors need it depends on the image, so a branch per vector is
        // mispredicted on every new image while a benchmark repeating one image hides that:
        // at 224 px (RGB, one thread, A/B in one process, 32 distinct sample images, min of
        // 30) deferring took (5, .2) from 72-80 to 54-57 us and (6, .2) from 73-75 to 57-62
        // us, against 47-52 us for one image repeated. For the corrected plans (about 2 % of
        // vectors redone) keeping Eh and Ev for the whole strip as well cost 3-9 us more
        // than it saved.
        constexpr bool Defer = !Corr;
        // Defer: rows -1 .. h + 1 never wrap the ring when h + 2 <= kDiskDeferRing.
        std::uint16_t* bring =
            sized(scratch.b, (Defer ? std::min(h + 2, kDiskDeferRing) : 4) * SW);
        float* ehring = sized(scratch.eh, Corr ? 4 * SW : 0);
        std::int32_t* ev = sized(scratch.ev, Corr ? SW : 0);
        float* vrow = sized(scratch.v, SW);
        const ptrdiff_t block = std::min(h, kDiskDeferRows);
        std::int32_t* redo = sized(scratch.redo, Defer ? block * NV : 0);
        auto bslot = [bring](ptrdiff_t yv) MMC_LAMBDA_INLINE {
            return bring + (Defer ? (yv + 1) & (kDiskDeferRing - 1) : yv & 3) * SW;
        };
        auto ehslot = [ehring](ptrdiff_t yv) MMC_LAMBDA_INLINE {
            return ehring + (yv & 3) * SW;
        };
        // Single correction taps as (dy, dx * c), once per call.
        std::vector<DiskTapOff> toff;
        ptrdiff_t tn[4] = {0, 0, 0, 0};
        {
            const DiskTaps* lists[4] = {&plan.ev_pos, &plan.ev_neg, &plan.eh_pos, &plan.eh_neg};
            for (int l = 0; l < 4; ++l) {
                for (const auto& [dy, dx] : *lists[l]) toff.push_back({dy, dx * c});
                tn[l] = static_cast<ptrdiff_t>(lists[l]->size());
            }
        }
        const DiskTapOff* vpos = toff.data();
        const DiskTapOff* vneg = vpos + tn[0];
        const DiskTapOff* hpos = vneg + tn[1];
        const DiskTapOff* hneg = hpos + tn[2];
        // Eh: the running sum of every vertical run, one row of the strip's lanes each.
        struct RunRt {
            ptrdiff_t dy0, dy1, dxc;
            bool add;
            std::uint16_t* sum;
        };
        std::vector<RunRt> runs;
        {
            std::uint16_t* buf =
                sized(scratch.runs, static_cast<ptrdiff_t>(plan.eh_runs.size()) * SW);
            for (const DiskRun& r : plan.eh_runs) {
                runs.push_back({r.dy0, r.dy1, r.dx * c, r.sign > 0, buf});
                buf += SW;
            }
        }
        // Ev: per column span, a ring of its sums over the rows y + dymin .. y + dymax of output
        // row y (newest: the slot of row y + dymax). A span -W..W with W the half width of disk
        // ring j is the sum of rings 0..j (rings = j + 1; -1 for other spans): where their
        // buffers hold the span's newest row it is read from them rather than summed again.
        struct SpanRt {
            ptrdiff_t dxc0, n, dymin, dymax, n_slots, rings;
            const std::vector<std::pair<ptrdiff_t, int>>* rows;
            std::uint16_t* ring;
            ptrdiff_t newest;  // slot of the newest row summed (no division in the row loop)
        };
        std::vector<SpanRt> spans;
        {
            ptrdiff_t total = 0;
            for (const DiskSpan& sp : plan.ev_spans) {
                ptrdiff_t lo = sp.rows[0].first, hi = lo;
                for (const auto& [dy, sign] : sp.rows) {
                    lo = std::min(lo, dy);
                    hi = std::max(hi, dy);
                }
                ptrdiff_t nr_span = -1;
                for (ptrdiff_t j = 0; j < nr; ++j) {
                    if (sp.dx0 == -sp.dx1 && plan.rings[j].dx.back() == sp.dx1) nr_span = j + 1;
                }
                spans.push_back({sp.dx0 * c, sp.dx1 - sp.dx0 + 1, lo, hi, hi - lo + 1, nr_span,
                                 &sp.rows, nullptr, 0});
                total += (hi - lo + 1) * SW;
            }
            std::uint16_t* buf = sized(scratch.spans, total);
            for (SpanRt& sp : spans) {
                sp.ring = buf;
                buf += sp.n_slots * SW;
            }
        }
        // Slot s of a span's ring, or s - n_slots when s is that far past it (one wrap).
        auto span_at = [](const SpanRt& sp, ptrdiff_t s) MMC_LAMBDA_INLINE {
            const ptrdiff_t q = s < 0 ? s + sp.n_slots : (s >= sp.n_slots ? s - sp.n_slots : s);
            return sp.ring + q * SW;
        };
        // The span's sum over padded row yv, in h.
        auto span_sum = [&](const SpanRt& sp, ptrdiff_t yv, ptrdiff_t pb, u16x32 (&h)[NI])
                            MMC_LAMBDA_INLINE {
            const uint8_t* p = prow(yv) + pb + sp.dxc0;
            for (int v = 0; v < NI; ++v) h[v] = Isa::widen(p + 32 * v);
            for (ptrdiff_t t = 1; t < sp.n; ++t) {
                for (int v = 0; v < NI; ++v) h[v] += Isa::widen(p + t * c + 32 * v);
            }
        };
        // 32-lane int16 sums (modulo 2^16) as int32 in out (SW lanes), in registers: a row
        // stored in 64-byte vectors and read back in halves would stall on store forwarding.
        auto store_s16 = [](std::int32_t* out, const u16x32 (&a)[NI]) MMC_LAMBDA_INLINE {
            for (int v = 0; v < NI; ++v) {
                disk_store(out + 32 * v, Isa::s16_low(a[v]));
                disk_store(out + 32 * v + 16, Isa::s16_high(a[v]));
            }
        };
        // Ev(y) into ev, k being the last row advanced: disk ring j's buffer holds rows
        // k - h_j .. k + h_j, the newest in the slot before r.slot.
        auto ev_row = [&](ptrdiff_t y, ptrdiff_t pb, ptrdiff_t k) MMC_LAMBDA_INLINE {
            u16x32 a[NI];
            disk_tap_sum<Isa, NI>(a, rows_base, y, pb, vpos, tn[0], vneg, tn[1]);
            for (SpanRt& sp : spans) {
                u16x32 hnew[NI];
                const ptrdiff_t yv = y + sp.dymax;
                bool held = sp.rings > 0;
                for (ptrdiff_t j = 0; held && j < sp.rings; ++j) {
                    held = yv - k <= rings[j].h && k - yv <= rings[j].h;
                }
                if (held) {
                    // Ring j's newest row, k + h_j, is in the slot before r.slot.
                    for (int v = 0; v < NI; ++v) hnew[v] = u16x32{};
                    for (ptrdiff_t j = 0; j < sp.rings; ++j) {
                        const DiskRingRt& r = rings[j];
                        ptrdiff_t q = r.slot - 1 - (k + r.h - yv);
                        q = q < 0 ? q + r.slots : q;
                        const std::uint16_t* slot = r.buf + q * SW;
                        for (int v = 0; v < NI; ++v) hnew[v] += disk_load<u16x32>(slot + 32 * v);
                    }
                } else {
                    span_sum(sp, yv, pb, hnew);
                }
                sp.newest = sp.newest + 1 == sp.n_slots ? 0 : sp.newest + 1;
                std::uint16_t* mine = span_at(sp, sp.newest);
                for (int v = 0; v < NI; ++v) disk_store(mine + 32 * v, hnew[v]);
                for (const auto& [dy, sign] : *sp.rows) {
                    const std::uint16_t* slot = span_at(sp, sp.newest - (sp.dymax - dy));
                    for (int v = 0; v < NI; ++v) {
                        const u16x32 x =
                            dy == sp.dymax ? hnew[v] : disk_load<u16x32>(slot + 32 * v);
                        a[v] = sign > 0 ? a[v] + x : a[v] - x;
                    }
                }
            }
            store_s16(ev, a);
        };
        // Eh(k) into its float slot; init: the running sums from scratch (the strip's first
        // row), else updated from row k - 1.
        auto eh_row = [&](ptrdiff_t k, ptrdiff_t pb, bool init) MMC_LAMBDA_INLINE {
            u16x32 a[NI];
            disk_tap_sum<Isa, NI>(a, rows_base, k, pb, hpos, tn[2], hneg, tn[3]);
            for (const RunRt& r : runs) {
                for (int v = 0; v < NI; ++v) {
                    u16x32 sv;
                    if (init) {
                        sv = Isa::widen(prow(k + r.dy0) + pb + r.dxc + 32 * v);
                        for (ptrdiff_t dy = r.dy0 + 1; dy <= r.dy1; ++dy) {
                            sv += Isa::widen(prow(k + dy) + pb + r.dxc + 32 * v);
                        }
                    } else {
                        sv = disk_load<u16x32>(r.sum + 32 * v) +
                             Isa::widen(prow(k + r.dy1) + pb + r.dxc + 32 * v) -
                             Isa::widen(prow(k - 1 + r.dy0) + pb + r.dxc + 32 * v);
                    }
                    disk_store(r.sum + 32 * v, sv);
                    a[v] = r.add ? a[v] + sv : a[v] - sv;
                }
            }
            float* out = ehslot(k);
            for (int v = 0; v < NI; ++v) {
                disk_store(out + 32 * v, __builtin_convertvector(Isa::s16_low(a[v]), f32x16));
                disk_store(out + 32 * v + 16,
                           __builtin_convertvector(Isa::s16_high(a[v]), f32x16));
            }
        };
        const double wc = plan.wc, rho = plan.rho;
        // Broadcast once: a scalar operand inside the loops is rebuilt lane by lane where the
        // variant splits the 16-lane vectors (AVX2, baseline).
        const f32x16 wcf = static_cast<float>(wc) + f32x16{};
        const f32x16 rhof = static_cast<float>(rho) + f32x16{};
        const f32x16 near = plan.near + f32x16{};
        const bool force_double = disk_force_double;
        const bool tiny = plan.tiny;
        const f32x16 tiny_wc = plan.tiny_wc + f32x16{}, tiny_lo = plan.tiny_lo + f32x16{},
                     tiny_hi = plan.tiny_hi + f32x16{};
        const f64x8 rho8 = rho + f64x8{}, wc8 = wc + f64x8{};
        // The compiled radius-7 shape's Ev is two single taps, (-8, 0) and (8, 0) (checked by
        // disk_filter_strips): u_at reads them straight from the image rows (ev_rows, set for
        // each output row) instead of ev_row summing them into ev to be read back.
        constexpr bool EvDirect = Corr && RS == 7;
        const uint8_t* ev_rows[2] = {};
        auto u_at = [&](const std::uint16_t* b0, const std::uint16_t* b2, ptrdiff_t i)
                        MMC_LAMBDA_INLINE {
            i32x16 t = Isa::u16(b0 + i) + Isa::u16(b2 + i);
            if constexpr (EvDirect) {
                t += Isa::u8(ev_rows[0] + i) + Isa::u8(ev_rows[1] + i);
            } else if constexpr (Corr) {
                t += disk_load<i32x16>(ev + i);
            }
            return t;
        };
        // Output row y of the strip at s0: straight to dst when the strip is whole, else
        // staged (the redo pass still writes into it) and copied after its block.
        uint8_t* stage = nullptr;
        auto gauss_out = [&](ptrdiff_t y, ptrdiff_t s0, ptrdiff_t n_out) MMC_LAMBDA_INLINE {
            return n_out == L ? dst + y * row + s0
                              : stage + (y & (kDiskDeferRows - 1)) * SW;
        };
        // B + rho (E + rho C) in double from the exact integer sums, at output vector t of the
        // row whose B rows y - 1, y, y + 1 are b0, b1, b2 and Eh rows h0, h1, h2.
        auto exact = [&](const std::uint16_t* b0, const std::uint16_t* b1,
                         const std::uint16_t* b2, const float* h0, const float* h1,
                         const float* h2, int t, uint8_t* o) MMC_LAMBDA_INLINE {
            const ptrdiff_t i = G + 16 * t;
            i32x16 e = u_at(b0, b2, i) + (Isa::u16(b1 + i - c) + Isa::u16(b1 + i + c));
            i32x16 k = u_at(b0, b2, i - c) + u_at(b0, b2, i + c);
            if constexpr (Corr) {  // Eh holds small integers: exact in float32
                e += __builtin_convertvector(disk_load<f32x16>(h1 + i), i32x16);
                k += __builtin_convertvector(disk_load<f32x16>(h0 + i) +
                                                 disk_load<f32x16>(h2 + i),
                                             i32x16);
            }
            const i32x16 bc = Isa::u16(b1 + i);
            auto half = [&](i32x8 bh, i32x8 eh, i32x8 kh) MMC_LAMBDA_INLINE {
                const f64x8 acc = __builtin_convertvector(bh, f64x8) +
                                  rho8 * (__builtin_convertvector(eh, f64x8) +
                                          rho8 * __builtin_convertvector(kh, f64x8));
                return __builtin_convertvector(wc8 * acc, i32x8);
            };
            // Stored here rather than returned: a 16-lane vector assigned on one branch only is
            // kept in memory where the variant splits it (AVX2).
            disk_store(o + 16 * t,
                       Isa::bytes(dv::join(half(dv::low(bc), dv::low(e), dv::low(k)),
                                           half(dv::high(bc), dv::high(e), dv::high(k)))));
        };
        // Defer: the vectors redone after the block at row y0, as (y - y0) * NV + t.
        ptrdiff_t n_redo = 0, y0 = 0;
        auto emit = [&](ptrdiff_t y, ptrdiff_t k, ptrdiff_t pb, ptrdiff_t s0, ptrdiff_t n_out)
                        MMC_LAMBDA_INLINE {
            const std::uint16_t* b0 = bslot(y - 1);
            const std::uint16_t* b1 = bslot(y);
            const std::uint16_t* b2 = bslot(y + 1);
            const float* h0 = ehslot(y - 1);
            const float* h1 = ehslot(y);
            const float* h2 = ehslot(y + 1);
            if constexpr (EvDirect) {
                ev_rows[0] = prow(y - 8) + pb;
                ev_rows[1] = prow(y + 8) + pb;
            } else if constexpr (Corr) {
                ev_row(y, pb, k);
            }
            uint8_t* o = gauss_out(y, s0, n_out);
            // The float32 result q where q2 agrees, else the double evaluation.
            auto keep = [&](int t, const i32x16& q, const i32x16& q2) MMC_LAMBDA_INLINE {
                if constexpr (Defer) {
                    disk_store(o + 16 * t, Isa::bytes(q));
                    redo[n_redo] = static_cast<std::int32_t>((y - y0) * NV + t);
                    n_redo += static_cast<ptrdiff_t>(force_double | Isa::any(q ^ q2));
                } else if (force_double || Isa::any(q ^ q2)) {
                    exact(b0, b1, b2, h0, h1, h2, t, o);
                } else {
                    disk_store(o + 16 * t, Isa::bytes(q));
                }
            };
            if (tiny) {
                // Small neighbour weight: decided from B alone where its margins allow.
                for (int t = 0; t < NV - 1; ++t) {
                    const f32x16 bf = __builtin_convertvector(Isa::u16(b1 + G + 16 * t), f32x16);
                    keep(t, __builtin_convertvector(Isa::fmadd(bf, tiny_wc, -tiny_lo), i32x16),
                         __builtin_convertvector(Isa::fmadd(bf, tiny_wc, tiny_hi), i32x16));
                }
                return;
            }
            f32x16 vv[NV];
            for (int t = 0; t < NV; ++t) {
                const i32x16 ut = u_at(b0, b2, 16 * t);
                vv[t] = Isa::fmadd(rhof, __builtin_convertvector(ut, f32x16),
                                   __builtin_convertvector(Isa::u16(b1 + 16 * t), f32x16));
                if constexpr (CT == 0) disk_store(vrow + 16 * t, vv[t]);
            }
            for (int t = 0; t < NV - 1; ++t) {
                const ptrdiff_t i = G + 16 * t;
                f32x16 vc, nb;
                if constexpr (CT > 0) {
                    vc = disk_window<G>(vv[t], vv[t + 1]);
                    nb = disk_window<G - CT>(vv[t], vv[t + 1]) +
                         disk_window<G + CT>(vv[t], vv[t + 1]);
                } else {
                    vc = disk_load<f32x16>(vrow + i);
                    nb = disk_load<f32x16>(vrow + i - c) + disk_load<f32x16>(vrow + i + c);
                }
                if constexpr (Corr) {
                    nb += Isa::fmadd(rhof, disk_load<f32x16>(h0 + i) + disk_load<f32x16>(h2 + i),
                                     disk_load<f32x16>(h1 + i));
                }
                const f32x16 inner = Isa::fmadd(rhof, nb, vc);
                keep(t, __builtin_convertvector(Isa::fmadd(wcf, inner, near), i32x16),
                     __builtin_convertvector(Isa::fmadd(wcf, inner, -near), i32x16));
            }
        };
        // Rows y0 .. y1 - 1 made: with Defer, their vectors to redo redone in double; the
        // staged rows (a partial strip) copied to dst.
        auto finish_block = [&](ptrdiff_t y1, ptrdiff_t s0, ptrdiff_t n_out) {
            if constexpr (Defer) {
                for (ptrdiff_t j = 0; j < n_redo; ++j) {
                    const ptrdiff_t y = y0 + redo[j] / NV;  // no Eh: Defer has no corrections
                    exact(bslot(y - 1), bslot(y), bslot(y + 1), nullptr, nullptr, nullptr,
                          static_cast<int>(redo[j] % NV), gauss_out(y, s0, n_out));
                }
            }
            if (n_out < L) {
                for (ptrdiff_t y = y0; y < y1; ++y) {
                    std::memcpy(dst + y * row + s0, gauss_out(y, s0, n_out),
                                static_cast<std::size_t>(n_out));
                }
            }
            n_redo = 0;
            y0 = y1;
        };
        for (ptrdiff_t s0 = 0; s0 < row; s0 += L) {
            const ptrdiff_t pb = plan.fw * c + s0 - G;  // strip lane 0 = output sample s0 - G
            const ptrdiff_t n_out = std::min(L, row - s0);
            if (n_out < L) stage = sized(scratch.stage, block * SW);
            n_redo = 0;
            y0 = 0;
            u16x32 b[NI];
            start(b, -1, pb);
            for (int v = 0; v < NI; ++v) disk_store(bslot(-1) + 32 * v, b[v]);
            if constexpr (Corr) {
                // Over all SW lanes (the G lanes either side are not read).
                eh_row(-1, pb, true);
                // The span sums the first output rows read before computing their own.
                for (SpanRt& sp : spans) {
                    // Rows dymin .. dymax - 1 in slots 0 .. n_slots - 2; ev_row(0) then sums
                    // row dymax into the last slot.
                    for (ptrdiff_t yv = sp.dymin; yv < sp.dymax; ++yv) {
                        u16x32 h[NI];
                        span_sum(sp, yv, pb, h);
                        std::uint16_t* slot = span_at(sp, yv - sp.dymin);
                        for (int v = 0; v < NI; ++v) disk_store(slot + 32 * v, h[v]);
                    }
                    sp.newest = sp.n_slots - 2;
                }
            }
            for (ptrdiff_t k = 0; k <= h; ++k) {
                advance(b, k, pb);
                for (int v = 0; v < NI; ++v) disk_store(bslot(k) + 32 * v, b[v]);
                if constexpr (Corr) {
                    eh_row(k, pb, false);
                }
                if (k >= 2) emit(k - 2, k, pb, s0, n_out);
                // A full block once its last row (k - 2) is made: B(k) is the newest row held.
                if (k >= 2 && k - 1 - y0 == kDiskDeferRows) finish_block(k - 1, s0, n_out);
            }
            emit(h - 1, h, pb, s0, n_out);
            finish_block(h, s0, n_out);
        }
    }
}

// Each instantiation of the body is a function of its own, compiled for its variant's ISA.
// Inlined together into one function per variant, they slowed each other down: five more
// compiled shapes made the unchanged plans 10-20 % slower (224 px, RGB, one thread).
template <class Isa>
struct DiskBody;
#define MMC_DISK_BODY(ISA, ...)                                                              \
    template <>                                                                              \
    struct DiskBody<ISA> {                                                                   \
        template <int NV, bool Gauss, bool Corr, int CT, int RS>                             \
        static __attribute__((noinline, flatten, __VA_ARGS__)) void run(                     \
            const uint8_t* src, uint8_t* dst, const Shape& s, const DiskPlan& plan) {        \
            disk_filter_body<ISA, NV, Gauss, Corr, CT, RS>(src, dst, s, plan);               \
        }                                                                                    \
    };
#if MMC_DISK_DISPATCH
MMC_DISK_BODY(DiskIsaAvx512, target("arch=x86-64-v4,prefer-vector-width=512"))
MMC_DISK_BODY(DiskIsaAvx2, target("avx2,fma"))
#endif
MMC_DISK_BODY(DiskIsaBase)
#undef MMC_DISK_BODY

template <class Isa>
MMC_INLINE void disk_filter_strips(const uint8_t* src, uint8_t* dst, const Shape& s,
                                   const DiskPlan& plan) {
    using Body = DiskBody<Isa>;
    constexpr int F = kDiskFreeVecs, G = kDiskGaussVecs;
    const bool corr = plan.corrected();
    // RGB disks of the MedMNIST-C tables at 224 px (integer radii; which plan kind each level
    // gets follows from its alias sigma) have their ring shapes compiled in. Measured at 224 px
    // (RGB, one thread, min of 7 x 200 calls over 8 sample images, A/B in alternating
    // processes): radius 4 without the Gaussian 35-41 -> 25-27 us (with disk_pad_image's words),
    // (5, .2) 54-55 -> 50-52, (6, .3) 64-67 -> 60-63, (7, .4) 88-89 -> 85-86, (8, .5)
    // 116 -> 107-109 us.
    if (s.c == 3) {
        const int r = disk_shape_of(plan);
        if (!plan.gauss) {
            switch (r) {
            case 2: return Body::template run<F, false, false, 3, 2>(src, dst, s, plan);
            case 3: return Body::template run<F, false, false, 3, 3>(src, dst, s, plan);
            case 4: return Body::template run<F, false, false, 3, 4>(src, dst, s, plan);
            case 5: return Body::template run<F, false, false, 3, 5>(src, dst, s, plan);
            case 6: return Body::template run<F, false, false, 3, 6>(src, dst, s, plan);
            default: break;
            }
        } else if (!corr) {
            switch (r) {
            case 5: return Body::template run<G, true, false, 3, 5>(src, dst, s, plan);
            case 6: return Body::template run<G, true, false, 3, 6>(src, dst, s, plan);
            default: break;
            }
        } else {
            // Radius 7's Ev must be the two taps its compiled body reads (see u_at).
            static const DiskTaps ev7 = {{-8, 0}, {8, 0}};
            if (r == 7 && plan.ev_pos.size() == 2 &&
                std::is_permutation(ev7.begin(), ev7.end(), plan.ev_pos.begin()) &&
                plan.ev_neg.empty() && plan.ev_spans.empty()) {
                return Body::template run<G, true, true, 3, 7>(src, dst, s, plan);
            }
            if (r == 8) return Body::template run<G, true, true, 3, 8>(src, dst, s, plan);
        }
    }
    // The common channel counts (gray, RGB) are compiled with the count fixed.
    if (plan.gauss && s.c == 3) {
        if (corr) Body::template run<G, true, true, 3, 0>(src, dst, s, plan);
        else Body::template run<G, true, false, 3, 0>(src, dst, s, plan);
    } else if (plan.gauss && s.c == 1) {
        if (corr) Body::template run<G, true, true, 1, 0>(src, dst, s, plan);
        else Body::template run<G, true, false, 1, 0>(src, dst, s, plan);
    } else if (plan.gauss && corr) {
        Body::template run<G, true, true, 0, 0>(src, dst, s, plan);
    } else if (plan.gauss) {
        Body::template run<G, true, false, 0, 0>(src, dst, s, plan);
    } else {
        Body::template run<F, false, false, 0, 0>(src, dst, s, plan);
    }
}

// Channel planes of images wider than kDiskMaxChannels (the strips hold at most a few pixels
// of such images): each channel filtered as a one-channel image.
MMC_INLINE void disk_filter_planes(const uint8_t* src, uint8_t* dst, const Shape& s,
                                   const DiskPlan& plan,
                                   void (*one)(const uint8_t*, uint8_t*, const Shape&,
                                               const DiskPlan&)) {
    DiskScratch& scratch = disk_scratch();
    const ptrdiff_t n = s.h * s.w;
    uint8_t* in = sized(scratch.planes, 2 * n);
    uint8_t* out = in + n;
    const Shape p{s.h, s.w, 1};
    for (ptrdiff_t ch = 0; ch < s.c; ++ch) {
        for (ptrdiff_t i = 0; i < n; ++i) in[i] = src[i * s.c + ch];
        one(in, out, p, plan);
        for (ptrdiff_t i = 0; i < n; ++i) dst[i * s.c + ch] = out[i];
    }
}

#if MMC_DISK_DISPATCH
__attribute__((flatten, target("arch=x86-64-v4,prefer-vector-width=512"))) void disk_filter_v4(
    const uint8_t* src, uint8_t* dst, const Shape& s, const DiskPlan& plan) {
    disk_filter_strips<DiskIsaAvx512>(src, dst, s, plan);
}
__attribute__((flatten, target("avx2,fma"))) void disk_filter_avx2(const uint8_t* src, uint8_t* dst,
                                                      const Shape& s, const DiskPlan& plan) {
    disk_filter_strips<DiskIsaAvx2>(src, dst, s, plan);
}
#endif
void disk_filter_base(const uint8_t* src, uint8_t* dst, const Shape& s, const DiskPlan& plan) {
    disk_filter_strips<DiskIsaBase>(src, dst, s, plan);
}

using DiskFilterFn = void (*)(const uint8_t*, uint8_t*, const Shape&, const DiskPlan&);

// The named variant ("avx512", "avx2", "baseline"), or nullptr if this CPU cannot run it.
DiskFilterFn disk_filter_named(const std::string& name) {
#if MMC_DISK_DISPATCH
    __builtin_cpu_init();
    const bool v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (name == "avx512") return v4 ? &disk_filter_v4 : nullptr;
    if (name == "avx2") return avx2 ? &disk_filter_avx2 : nullptr;
#endif
    if (name == "baseline") return &disk_filter_base;
    return nullptr;
}

struct DiskVariant {
    DiskFilterFn fn;
    std::string name;
};

// The AVX2 variant is never the automatic choice: GCC 12 keeps its 64-byte vectors in memory
// (two 32-byte halves through the stack), and on an AVX2-only AMD EPYC (Zen 3) it ran 2-5x
// slower than the SSE2 baseline (224 px, RGB, one thread, radius 2-8: 0.54-5.8 ms against
// 0.24-1.1 ms; gray radius 3-8: 0.49-2.3 ms against 0.24-0.53 ms). It stays selectable
// (_set_disk_isa) so that the tests keep checking it gives the same bytes.
DiskVariant best_disk_variant() {
    for (const char* name : {"avx512", "baseline"}) {
        if (const DiskFilterFn fn = disk_filter_named(name)) return {fn, name};
    }
    return {&disk_filter_base, "baseline"};
}

// Chosen once at load time; tests may switch it (_set_disk_isa) to check every variant on one
// machine.
DiskVariant disk_variant = best_disk_variant();

DiskFilterFn disk_filter_impl() { return disk_variant.fn; }

std::string get_disk_isa() { return disk_variant.name; }

void set_disk_double(bool on) { disk_force_double = on; }

bool set_disk_isa(const std::string& name) {
    const DiskFilterFn fn = disk_filter_named(name);
    if (!fn) return false;
    disk_variant = {fn, name};
    return true;
}

// Disk plans by (kernel, mask, gauss1d) contents: planning costs more than filtering a small
// image. A std::nullopt entry records that the disk plan does not apply.
std::shared_ptr<const std::optional<DiskPlan>> cached_disk_plan(
    const double* k, ptrdiff_t kh, ptrdiff_t kw, const uint8_t* mask, ptrdiff_t mh, ptrdiff_t mw,
    const double* g, ptrdiff_t gl) {
    using Plan = std::shared_ptr<const std::optional<DiskPlan>>;
    static std::mutex lock;
    static std::unordered_map<std::string, Plan> cache;
    // The last plans used, compared in place (no key built, no hash): a call repeats the few
    // kernels of one table, and building and hashing the ~2.7 kB key cost about 0.4 us a call.
    static std::vector<std::pair<std::string, Plan>> recent;
    constexpr std::size_t kRecent = 8;
    const ptrdiff_t dims[5] = {kh, kw, mh, mw, gl};
    const std::pair<const void*, std::size_t> parts[4] = {
        {dims, sizeof dims},
        {k, sizeof(double) * static_cast<std::size_t>(kh * kw)},
        {mask, static_cast<std::size_t>(mh * mw)},
        {g, sizeof(double) * static_cast<std::size_t>(gl)}};
    std::size_t key_size = 0;
    for (const auto& part : parts) key_size += part.second;
    const auto same = [&](const std::string& key) {
        if (key.size() != key_size) return false;
        std::size_t at = 0;
        for (const auto& [data, n] : parts) {
            if (std::memcmp(key.data() + at, data, n) != 0) return false;
            at += n;
        }
        return true;
    };
    {
        std::lock_guard<std::mutex> guard(lock);
        for (auto it = recent.rbegin(); it != recent.rend(); ++it) {
            if (same(it->first)) return it->second;
        }
    }
    std::string key;
    key.reserve(key_size);
    for (const auto& [data, n] : parts) key.append(static_cast<const char*>(data), n);
    Plan plan;
    {
        std::lock_guard<std::mutex> guard(lock);
        auto it = cache.find(key);
        if (it != cache.end()) plan = it->second;
    }
    if (!plan) plan = std::make_shared<const std::optional<DiskPlan>>(
        plan_disk(k, kh, kw, mask, mh, mw, g, gl));
    std::lock_guard<std::mutex> guard(lock);
    if (cache.size() >= 256) cache.clear();
    cache.emplace(key, plan);
    if (recent.size() == kRecent) recent.erase(recent.begin());
    recent.emplace_back(std::move(key), plan);
    return plan;
}

ImageOut filter2d(const ImageIn& image,
                  const Array<double>& kernel, const std::optional<Array<uint8_t>>& mask,
                  const std::optional<Array<double>>& gauss1d) {
    const Shape s = image_shape(image, "filter2d");
    if (kernel.ndim() != 2 || kernel.shape(0) % 2 != 1 || kernel.shape(1) % 2 != 1) {
        throw std::invalid_argument("filter2d: kernel must be two-dimensional with odd sizes");
    }
    if (mask.has_value() != gauss1d.has_value()) {
        throw std::invalid_argument("filter2d: give both mask and gauss1d, or neither");
    }
    const double* k = kernel.data();
    const ptrdiff_t kh = kernel.shape(0), kw = kernel.shape(1);
    if (!(abs_sum(k, kh * kw) <= kMaxGain)) {
        throw std::invalid_argument("filter2d: sum(|kernel|) must be finite and <= 1024");
    }
    std::optional<FilterPlan> structured;
    if (mask) {
        if (mask->ndim() != 2 || mask->shape(0) % 2 != 1 || mask->shape(1) % 2 != 1) {
            throw std::invalid_argument("filter2d: mask must be two-dimensional with odd sizes");
        }
        const ptrdiff_t gl = vector_length(*gauss1d, "filter2d", "gauss1d");
        if (gl % 2 != 1) throw std::invalid_argument("filter2d: gauss1d must have an odd length");
        const auto disk = cached_disk_plan(k, kh, kw, mask->data(), mask->shape(0),
                                           mask->shape(1), gauss1d->data(), gl);
        if (disk->has_value()) {
            ImageOut out = new_image(s);
            const uint8_t* src = image.data();
            uint8_t* dst = out.mutable_data();
            {
                py::gil_scoped_release release;
                if (s.c > kDiskMaxChannels) {
                    disk_filter_planes(src, dst, s, **disk, disk_filter_impl());
                } else {
                    disk_filter_impl()(src, dst, s, **disk);
                }
            }
            return out;
        }
        structured = plan_structured(k, kh, kw, mask->data(), mask->shape(0), mask->shape(1),
                                     gauss1d->data(), gl);
    }
    FilterPlan plan = plan_exact(k, kh, kw);
    if (structured && structured->cost() < plan.cost()) plan = std::move(*structured);
    ImageOut out = new_image(s);
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        filter2d_impl(src, dst, s, plan);
    }
    return out;
}

// Testing aid: which evaluation filter2d gives (kernel, mask, gauss1d): without a disk plan
// "exact" or "structured" (the cheaper general plan, "+border" when it has border terms); else
// "free" (Gaussian-free disk plan), "gauss" or "tiny" (Gaussian disk plan, with
// the pre-decision from B alone), with "+corrected" when the plan has border corrections.
std::string disk_plan_kind(const Array<double>& kernel, const Array<uint8_t>& mask,
                           const Array<double>& gauss1d) {
    if (kernel.ndim() != 2 || mask.ndim() != 2) {
        throw std::invalid_argument("_disk_plan_kind: kernel and mask must be two-dimensional");
    }
    const ptrdiff_t gl = vector_length(gauss1d, "_disk_plan_kind", "gauss1d");
    const auto disk = cached_disk_plan(kernel.data(), kernel.shape(0), kernel.shape(1),
                                       mask.data(), mask.shape(0), mask.shape(1), gauss1d.data(),
                                       gl);
    if (!disk->has_value()) {
        const FilterPlan exact = plan_exact(kernel.data(), kernel.shape(0), kernel.shape(1));
        const FilterPlan st =
            plan_structured(kernel.data(), kernel.shape(0), kernel.shape(1), mask.data(),
                            mask.shape(0), mask.shape(1), gauss1d.data(), gl);
        if (!(st.cost() < exact.cost())) return "exact";
        return st.ev_classes.empty() && st.eh_classes.empty() ? "structured" : "structured+border";
    }
    const DiskPlan& plan = **disk;
    std::string kind = !plan.gauss ? "free" : (plan.tiny ? "tiny" : "gauss");
    return plan.corrected() ? kind + "+corrected" : kind;
}

// ---------------------------------------------------------------------------------------------
// Gaussian blur: torchvision.transforms.functional.gaussian_blur on a uint8 image.
//
// torchvision pads by k // 2 with "reflect" (mirror without repeating the edge), correlates each
// channel with outer(k1d, k1d) in float32, rounds half to even (torch.round) and casts to uint8.
// Here the correlation is separable (rows, then columns, in float32), which differs from the 2-D
// float32 sum by rounding only (about 2e-5 of the pixels differ by one level at 224 px). Images smaller than the padding keep reflecting
// (period 2(n - 1)) where torch would raise; results are clamped to [0, 255] before the cast.

constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23, see round_u8

// out[j] = sum_i k[i] * rows[i][j], in this order per element: k[0] * rows[0][j], then taps added
// four at a time as ((t1 + t2) + (t3 + t4)), then the remaining taps one by one. (This was once
// four passes over `out`; the sum per element, and so every rounding, is the same in one pass.)
// The rounding differs from torch's 2-D float32 sum either way.
template <int T>
inline __attribute__((always_inline)) float correlate_at(const float* const* r, const float* k,
                                                         ptrdiff_t j) {
    float acc = k[0] * r[0][j];
    int i = 1;
    for (; i + 4 <= T; i += 4) {
        acc += (k[i] * r[i][j] + k[i + 1] * r[i + 1][j]) + (k[i + 2] * r[i + 2][j] + k[i + 3] * r[i + 3][j]);
    }
    for (; i < T; ++i) acc += k[i] * r[i][j];
    return acc;
}

// 1.5 * 2^23: (v + c) - c rounds v to an integer, half to even, for |v| < 2^22 (IEEE binary32
// round-to-nearest-even, the default mode). Then torch's cast to uint8, clamped to [0, 255]
// (|v| <= 255 * 1024^2 by the check on sum|kernel1d| in gaussian_blur()).
inline __attribute__((always_inline)) uint8_t round_u8(float v) {
    std::int32_t q = static_cast<std::int32_t>((v + kRoundMagic) - kRoundMagic);
    q = q < 0 ? 0 : (q > 255 ? 255 : q);
    return static_cast<uint8_t>(q);
}

// out[j] = Store(correlate_at<T>(rows, k, j)): the filtered rows (float) or the output (uint8).
struct StoreFloat {
    static inline __attribute__((always_inline)) float apply(float v) { return v; }
};
struct StoreU8 {
    static inline __attribute__((always_inline)) uint8_t apply(float v) { return round_u8(v); }
};

template <int T, class Store, class Out>
inline __attribute__((always_inline)) void correlate_fixed(Out* __restrict out,
                                                           const float* const* rows,
                                                           const float* k, ptrdiff_t n) {
    const float* r[T];
    float kk[T];
    for (int i = 0; i < T; ++i) {
        r[i] = rows[i];
        kk[i] = k[i];
    }
    for (ptrdiff_t j = 0; j < n; ++j) out[j] = Store::apply(correlate_at<T>(r, kk, j));
}

// Any tap count, same order of operations as correlate_at (one pass per group of four taps).
MMC_CLONES void correlate_generic(float* __restrict out, const float* const* rows, const float* k,
                                  ptrdiff_t taps, ptrdiff_t n) {
    {
        const float k0 = k[0];
        const float* __restrict r0 = rows[0];
        for (ptrdiff_t j = 0; j < n; ++j) out[j] = k0 * r0[j];
    }
    ptrdiff_t i = 1;
    for (; i + 4 <= taps; i += 4) {
        const float k0 = k[i], k1 = k[i + 1], k2 = k[i + 2], k3 = k[i + 3];
        const float* __restrict r0 = rows[i];
        const float* __restrict r1 = rows[i + 1];
        const float* __restrict r2 = rows[i + 2];
        const float* __restrict r3 = rows[i + 3];
        for (ptrdiff_t j = 0; j < n; ++j) {
            out[j] += (k0 * r0[j] + k1 * r1[j]) + (k2 * r2[j] + k3 * r3[j]);
        }
    }
    for (; i < taps; ++i) {
        const float ki = k[i];
        const float* __restrict r = rows[i];
        for (ptrdiff_t j = 0; j < n; ++j) out[j] += ki * r[j];
    }
}

#define MMC_GAUSS_TAPS(X) \
    X(1) X(3) X(5) X(7) X(9) X(11) X(13) X(15) X(17) X(19) X(21) X(23) X(25) X(27) X(29) X(31)

#define MMC_CORRELATE_FUNCS(ATTR, SUFFIX)                                                        \
    ATTR void correlate_rows##SUFFIX(float* __restrict out, const float* const* rows,           \
                                     const float* k, ptrdiff_t taps, ptrdiff_t n) {             \
        switch (taps) {                                                                         \
            MMC_GAUSS_TAPS(MMC_CASE_ROWS)                                                       \
            default: correlate_generic(out, rows, k, taps, n);                                  \
        }                                                                                       \
    }                                                                                           \
    ATTR void correlate_rows_round##SUFFIX(uint8_t* __restrict out, float* __restrict scratch,  \
                                           const float* const* rows, const float* k,            \
                                           ptrdiff_t taps, ptrdiff_t n) {                       \
        switch (taps) {                                                                         \
            MMC_GAUSS_TAPS(MMC_CASE_ROUND)                                                      \
            default:                                                                            \
                correlate_generic(scratch, rows, k, taps, n);                                   \
                for (ptrdiff_t j = 0; j < n; ++j) out[j] = round_u8(scratch[j]);                \
        }                                                                                       \
    }
#define MMC_CASE_ROWS(T) \
    case T: correlate_fixed<T, StoreFloat>(out, rows, k, n); return;
#define MMC_CASE_ROUND(T) \
    case T: correlate_fixed<T, StoreU8>(out, rows, k, n); return;

MMC_CORRELATE_FUNCS(MMC_CLONES, )
#ifdef MMC_HAVE_AVX512
// Same arithmetic with 16-float vectors (GCC's generic tuning otherwise keeps 8-float ones).
MMC_CORRELATE_FUNCS(MMC_AVX512_WIDE, _avx512)
#endif

void correlate_rows_any(float* out, const float* const* rows, const float* k, ptrdiff_t taps,
                        ptrdiff_t n) {
#ifdef MMC_HAVE_AVX512
    if (cpu_has_avx512()) return correlate_rows_avx512(out, rows, k, taps, n);
#endif
    correlate_rows(out, rows, k, taps, n);
}

void correlate_rows_round_any(uint8_t* out, float* scratch, const float* const* rows,
                              const float* k, ptrdiff_t taps, ptrdiff_t n) {
#ifdef MMC_HAVE_AVX512
    if (cpu_has_avx512()) return correlate_rows_round_avx512(out, scratch, rows, k, taps, n);
#endif
    correlate_rows_round(out, scratch, rows, k, taps, n);
}

void gaussian_blur_impl(const uint8_t* src, uint8_t* dst, const Shape& s, const float* k,
                        ptrdiff_t taps) {
    const ptrdiff_t row = s.row();
    const ptrdiff_t pad = taps / 2;
    const ptrdiff_t wp = s.w + 2 * pad;
    std::vector<float> padded(static_cast<std::size_t>(wp * s.c));
    std::vector<const float*> shifted(static_cast<std::size_t>(taps));  // padded, shifted by i px
    for (ptrdiff_t i = 0; i < taps; ++i) shifted[i] = padded.data() + i * s.c;
    // Ring of the `taps` row-filtered rows under the current output row (padded row yp in slot
    // yp % taps).
    std::vector<float> ring(static_cast<std::size_t>(taps * row));
    auto filter_row = [&](ptrdiff_t yp) {
        pad_row_reflect101(src + reflect101_index(yp - pad, s.h) * row, s.w, s.c, pad,
                           padded.data());
        correlate_rows_any(ring.data() + (yp % taps) * row, shifted.data(), k, taps, row);
    };
    for (ptrdiff_t yp = 0; yp + 1 < taps; ++yp) filter_row(yp);
    std::vector<const float*> rows(static_cast<std::size_t>(taps));
    std::vector<float> out_row(static_cast<std::size_t>(row));
    for (ptrdiff_t y = 0; y < s.h; ++y) {
        filter_row(y + taps - 1);
        for (ptrdiff_t i = 0; i < taps; ++i) rows[i] = ring.data() + ((y + i) % taps) * row;
        correlate_rows_round_any(dst + y * row, out_row.data(), rows.data(), k, taps, row);
    }
}

ImageOut gaussian_blur(const ImageIn& image, const Array<float>& kernel1d) {
    const char* fn = "gaussian_blur";
    const Shape s = image_shape(image, fn);
    const ptrdiff_t taps = vector_length(kernel1d, fn, "kernel1d");
    if (taps % 2 != 1) {
        throw std::invalid_argument("gaussian_blur: kernel1d must have an odd length");
    }
    double gain = 0.0;
    for (ptrdiff_t i = 0; i < taps; ++i) gain += std::fabs(static_cast<double>(kernel1d.data()[i]));
    if (!(gain <= kMaxGain)) {
        throw std::invalid_argument("gaussian_blur: sum(|kernel1d|) must be finite and <= 1024");
    }
    ImageOut out = new_image(s);
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    const float* k = kernel1d.data();
    {
        py::gil_scoped_release release;
        gaussian_blur_impl(src, dst, s, k, taps);
    }
    return out;
}

}  // namespace

void register_blur(py::module_& m) {
    m.def("_disk_isa", &get_disk_isa, "Instruction set of the disk filter (testing aid).");
    m.def("_set_disk_isa", &set_disk_isa, py::arg("name"),
          "Switch the disk filter (defocus fast path) to 'avx512', 'avx2' or 'baseline' if this CPU "
          "runs it; returns whether it did. Testing aid: not thread-safe.");
    m.def("_disk_plan_kind", &disk_plan_kind, py::arg("kernel"), py::arg("mask"),
          py::arg("gauss1d"), "Evaluation filter2d picks for a defocus kernel (testing aid).");
    m.def("_set_disk_double", &set_disk_double, py::arg("on"),
          "Make the disk filter's Gaussian plans take their double evaluation everywhere (True) or "
          "only where float32 cannot decide (False, the default). Testing aid: not thread-safe.");
    m.def("motion_blur", &motion_blur, py::arg("image"), py::arg("weights"), py::arg("dx"),
          py::arg("dy"),
          "ImageMagick 6 Q16 motion blur with explicit taps (see _native.pyi).");
    m.def("zoom_blur", &zoom_blur, py::arg("image"), py::arg("zooms"),
          "MedMNIST-C zoom blur (scipy.ndimage.zoom order 1 layers; see _native.pyi).");
    m.def("filter2d", &filter2d, py::arg("image"), py::arg("kernel"), py::arg("mask") = py::none(),
          py::arg("gauss1d") = py::none(),
          "OpenCV filter2D of image/255 with reflect-101 borders, truncated (see _native.pyi).");
    m.def("gaussian_blur", &gaussian_blur, py::arg("image"), py::arg("kernel1d"),
          "torchvision gaussian_blur with a given 1-D kernel (see _native.pyi).");
}

}  // namespace mmc
