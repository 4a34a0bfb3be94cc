// Resampling kernels of medmnistc_fast: Pillow's 8-bit BOX resize, bit for bit, and pixelation
// (BOX down, BOX back up) in one call.
//
// The arithmetic reproduces Pillow's separable resampling of 8-bit images (Pillow
// src/libImaging/Resample.c: precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc, ImagingResampleVertical_8bpc, ImagingResampleInner),
// implemented here from its rules and verified against Pillow 13.0.0 (tests/test_resample.py).
// Per axis, for a resize from `in` to `out` samples:
//
//   scale = in / out (double; Pillow divides the float box width by the int size in double),
//   filterscale = max(scale, 1), support = 0.5 * filterscale (the BOX filter's support is 0.5),
//   for output i: centre = (i + 0.5) * scale,
//     window [xmin, xmax) with xmin = (int)(centre - support + 0.5) clipped to >= 0 and
//     xmax = (int)(centre + support + 0.5) clipped to <= in,
//     w_x = box((x - centre + 0.5) * (1 / filterscale)), box(t) = 1 for -0.5 < t <= 0.5 else 0;
//     the weights are divided by their sum (unless it is 0) and converted to fixed point with
//     PRECISION_BITS = 32 - 8 - 2 = 22 fractional bits, rounding half away from zero:
//     W = (int)(0.5 + w * 2^22).
//   out = clip8((2^21 + sum_x px_x * W_x) >> 22) in int32, clip8 clamping to [0, 255].
//
// The two passes are each rounded to 8 bits. A pass whose size does not change is skipped
// (equivalent to one tap of weight 2^22). Pillow <= 12 always ran the horizontal pass first;
// Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
// pixels as the width (see vertical_first). Pillow resamples horizontally only the rows the
// vertical pass reads, which changes no value. RGB channels use the same weights.
//
// BOX weights are 0 or 1 before normalisation and the filter argument is monotone in x, so the
// nonzero fixed-point weights of one output sample are one run of `count` consecutive source
// samples, all equal to W = (int)(0.5 + 2^22 / count) (checked when a table is built). Each output
// is therefore (2^21 + W * S) >> 22 with S the integer sum of the run, which is what is computed
// here, exactly. Upsampling (scale <= 1) gives runs of one sample with W = 2^22: copies, so the
// upsampling half of pixelate is a pure gather.
//
// Implementation. A pass along the rows' inner axis is done on strips of 16 rows: the strip is
// transposed in registers (SSE2 / AVX2 / AVX-512 unpacks) into a scratch block whose columns are
// 16-byte vectors, running 16-bit sums along the columns are formed (modulo 2^16, exact for run
// sums below 2^16), and each run is the difference of two of them, scaled in 16-bit lanes. Its
// result is written transposed, so applying it twice (horizontal, then vertical) lands back in
// row-major order. The pixelate upsampling is a byte-permute gather (AVX-512 VBMI or SSSE3
// shuffles) of each small row, stored to every output row that repeats it. All paths use integer
// arithmetic only, so every ISA gives identical bytes.
#include "resample.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

// MMC_NO_SIMD builds only the portable kernels (what non-x86 targets get).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(MMC_NO_SIMD)
#include <immintrin.h>
#define MMC_X86 1
#else
#define MMC_X86 0
#endif

#include "kernel_common.hpp"

namespace mmc {
namespace {

using std::int32_t;
using std::ptrdiff_t;
using std::uint16_t;
using std::uint8_t;

// Pillow Resample.c: PRECISION_BITS = 32 - 8 - 2 (8 result bits, 2 bits of headroom, sign).
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kOne = int32_t{1} << kPrecisionBits;

// Largest side accepted: Pillow converts sizes to float (exact below 2^24) and indexes in int.
constexpr ptrdiff_t kMaxSide = ptrdiff_t{1} << 24;

// ---------------------------------------------------------------------------------------------
// Coefficient tables.

// One output sample of one axis: the sum of `count` source samples from `start`, times `weight`.
struct Run {
    int32_t start;   // first source sample (0 when count == 0)
    int32_t count;   // number of source samples with a nonzero weight (0 gives output 0)
    int32_t weight;  // their common fixed-point weight W (2^22 = 1)
    uint16_t w_hi;   // W >> 16, for the 16-bit evaluation
    uint16_t w_lo;   // W & 0xFFFF
    bool fits16;     // the 16-bit evaluation is exact for every sum of this run
};

struct AxisTable {
    std::vector<Run> runs;
    bool nearest;  // every run is one sample of weight 2^22: a gather
};

// Fixed-point weight of Pillow's normalize_coeffs_8bpc for a nonnegative weight.
int32_t to_fixed(double w) { return static_cast<int32_t>(0.5 + w * kOne); }

Run make_run(int32_t start, int32_t count, int32_t weight) {
    Run r{start, count, weight, static_cast<uint16_t>(weight >> 16),
          static_cast<uint16_t>(weight & 0xFFFF), false};
    // For a run sum S <= 255 * count < 2^16: A = S * w_hi + ((S * w_lo) >> 16) = (S * W) >> 16,
    // and (2^21 + S * W) >> 22 = (A + 32) >> 6 because 2^21 is a multiple of 2^16 (the discarded
    // low 16 bits cannot carry). A is largest at S = 255 * count; it must stay below 2^16 - 32.
    const std::int64_t s_max = 255 * static_cast<std::int64_t>(count);
    const std::int64_t a_max = (s_max * weight) >> 16;
    r.fits16 = s_max <= 0xFFFF && a_max + 32 <= 0xFFFF && ((a_max + 32) >> 6) <= 255;
    return r;
}

// Pillow's BOX coefficients for one axis (see the file comment), as runs.
AxisTable compute_axis(ptrdiff_t in, ptrdiff_t out) {
    AxisTable t;
    t.runs.reserve(static_cast<std::size_t>(out));
    t.nearest = true;
    if (in == out) {  // Pillow skips the pass: identity
        for (ptrdiff_t i = 0; i < out; ++i) t.runs.push_back(make_run(static_cast<int32_t>(i), 1, kOne));
        return t;
    }
    // (double)(in1 - in0) / outSize with in0 = 0.0f and in1 = (float)in, exact integers.
    const double scale = static_cast<double>(static_cast<float>(in)) / static_cast<double>(out);
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = 0.5 * filterscale;
    const double ss = 1.0 / filterscale;
    std::vector<double> w;
    std::vector<int32_t> fixed;
    for (ptrdiff_t i = 0; i < out; ++i) {
        const double centre = (static_cast<double>(i) + 0.5) * scale;  // in0 = 0
        int xmin = static_cast<int>(centre - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = static_cast<int>(centre + support + 0.5);
        if (xmax > in) xmax = static_cast<int>(in);
        const int n = std::max(xmax - xmin, 0);
        w.assign(static_cast<std::size_t>(n), 0.0);
        double ww = 0.0;
        for (int x = 0; x < n; ++x) {
            const double arg = (static_cast<double>(x + xmin) - centre + 0.5) * ss;
            w[x] = (arg > -0.5 && arg <= 0.5) ? 1.0 : 0.0;
            ww += w[x];
        }
        fixed.assign(w.size(), 0);
        for (int x = 0; x < n; ++x) fixed[x] = to_fixed(ww != 0.0 ? w[x] / ww : w[x]);
        int first = -1, last = -1;
        for (int x = 0; x < n; ++x) {
            if (fixed[x] != 0) {
                if (first < 0) first = x;
                last = x;
            }
        }
        if (first < 0) {  // no weight: Pillow writes clip8(2^21 >> 22) = 0
            t.runs.push_back(make_run(0, 0, 0));
            t.nearest = false;
            continue;
        }
        for (int x = first; x <= last; ++x) {
            if (fixed[x] != fixed[first]) {
                throw std::logic_error("resample: BOX weights are not one run of equal values");
            }
        }
        const Run r = make_run(xmin + first, last - first + 1, fixed[first]);
        t.nearest = t.nearest && r.count == 1 && r.weight == kOne;
        t.runs.push_back(r);
    }
    return t;
}

// A small thread-safe cache: pixelation at one image size needs the same tables every time.
template <class Key, class Value, class Make>
std::shared_ptr<const Value> cached(const Key& key, Make make) {
    struct KeyHash {
        std::size_t operator()(const Key& k) const {
            std::size_t h = 0;
            std::apply([&](auto... v) { ((h = h * 1000003u ^ std::hash<ptrdiff_t>()(v)), ...); }, k);
            return h;
        }
    };
    static std::mutex mutex;
    static std::unordered_map<Key, std::shared_ptr<const Value>, KeyHash> cache;
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = cache.find(key);
        if (it != cache.end()) return it->second;
    }
    auto value = std::make_shared<const Value>(make());
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() >= 1024) cache.clear();  // bound the memory of unusual workloads
    cache.emplace(key, value);
    return value;
}

std::shared_ptr<const AxisTable> axis_table(ptrdiff_t in, ptrdiff_t out) {
    return cached<std::tuple<ptrdiff_t, ptrdiff_t>, AxisTable>(std::make_tuple(in, out),
                                                               [&] { return compute_axis(in, out); });
}

// Gather plan of one upsampled row: output byte o (of ow * c) copies source byte src[o] of the
// small row. For SIMD, the output is cut in chunks of `chunk` bytes; chunk k reads the source
// window [base[k], base[k] + window) and idx holds each byte's offset in it.
struct ExpandPlan {
    ptrdiff_t out_len = 0;
    int chunk = 0, window = 0;
    bool simd = false;  // every chunk fits its window
    std::vector<int32_t> src;
    std::vector<int32_t> base;
    std::vector<uint8_t> idx;
};

ExpandPlan make_expand_plan(const AxisTable& tx, ptrdiff_t c, int chunk, int window) {
    ExpandPlan p;
    const ptrdiff_t ow = static_cast<ptrdiff_t>(tx.runs.size());
    p.out_len = ow * c;
    p.chunk = chunk;
    p.window = window;
    p.src.resize(static_cast<std::size_t>(p.out_len));
    for (ptrdiff_t x = 0; x < ow; ++x) {
        for (ptrdiff_t ch = 0; ch < c; ++ch)
            p.src[x * c + ch] = static_cast<int32_t>(tx.runs[x].start * c + ch);
    }
    p.simd = chunk > 0;
    if (!p.simd) return p;
    const ptrdiff_t n_chunks = (p.out_len + chunk - 1) / chunk;
    p.base.resize(static_cast<std::size_t>(n_chunks));
    p.idx.assign(static_cast<std::size_t>(n_chunks * chunk), 0);
    for (ptrdiff_t k = 0; k < n_chunks; ++k) {
        const ptrdiff_t lo = k * chunk, hi = std::min(p.out_len, lo + chunk);
        int32_t b = p.src[lo];
        for (ptrdiff_t o = lo; o < hi; ++o) b = std::min(b, p.src[o]);
        p.base[k] = b;
        for (ptrdiff_t o = lo; o < hi; ++o) {
            const int32_t d = p.src[o] - b;
            if (d >= window) p.simd = false;
            p.idx[o] = static_cast<uint8_t>(d < window ? d : 0);
        }
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// Per-thread workspaces, reused across calls (no allocation or zero-filling per image).

struct Workspace {
    std::vector<uint8_t> small, tmp, rows, scratch;
    std::vector<uint16_t> prefix, acc;
    std::vector<uint8_t*> outs;
};

template <class T>
T* grow(std::vector<T>& v, ptrdiff_t n) {
    if (static_cast<ptrdiff_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    return v.data();
}

// Buffers above this size are released after the call instead of being kept per thread.
constexpr std::size_t kKeepBytes = std::size_t{32} << 20;

void trim(Workspace& ws) {
    auto trim1 = [](auto& v) {
        if (v.capacity() * sizeof(v[0]) > kKeepBytes) std::decay_t<decltype(v)>().swap(v);
    };
    trim1(ws.small), trim1(ws.tmp), trim1(ws.rows), trim1(ws.scratch), trim1(ws.prefix), trim1(ws.acc);
}

// ---------------------------------------------------------------------------------------------
// Strip kernels. A strip is S = 16 rows (32 with AVX-512); scratch[col * S + r] = row r, byte
// column col; prefix[(i + C) * S + r] = sum of scratch columns i, i - C, i - 2C, ... (mod 2^16),
// with prefix[ch * S + r] = 0 for ch < C, so a run of channel c over pixels [s, s + n) sums to
// prefix[((s + n) * C + c) * S + r] - prefix[(s * C + c) * S + r].

constexpr int kStrip = 16;  // S of the portable, SSE2 and AVX2 kernels
constexpr int kStripMax = 32;

struct StripOps {
    int strip;  // rows per strip: 16, or 32 with AVX-512
    // rows[0 .. strip): strip rows -> scratch[col * strip + r]
    void (*transpose)(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch);
    void (*prefix)(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix);
    void (*runs)(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                 ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows);
    void (*expand)(const uint8_t* srow, const ExpandPlan& plan, uint8_t* const* outs, ptrdiff_t n_outs);
    int expand_chunk, expand_window;
    const char* name;
};

// 16 rows, columns [col0, ncols), column stride `stride` in scratch.
void transpose_scalar(const uint8_t* const* rows, ptrdiff_t col0, ptrdiff_t ncols, uint8_t* scratch,
                      ptrdiff_t stride = kStrip) {
    for (ptrdiff_t col = col0; col < ncols; ++col) {
        for (int r = 0; r < 16; ++r) scratch[col * stride + r] = rows[r][col];
    }
}

void transpose_portable(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch) {
    transpose_scalar(rows, 0, ncols, scratch);
}

void prefix_portable(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix) {
    std::fill(prefix, prefix + c * kStrip, uint16_t{0});
    for (ptrdiff_t i = 0; i < ncols; ++i) {
        for (int r = 0; r < kStrip; ++r) {
            prefix[(i + c) * kStrip + r] =
                static_cast<uint16_t>(prefix[i * kStrip + r] + scratch[i * kStrip + r]);
        }
    }
}

inline uint8_t value16(uint16_t sum, const Run& run) {
    const uint16_t a = static_cast<uint16_t>(
        static_cast<uint16_t>(sum * run.w_hi) +
        static_cast<uint16_t>((static_cast<std::uint32_t>(sum) * run.w_lo) >> 16) + 32);
    return static_cast<uint8_t>(a >> 6);
}

inline uint8_t value_wide(std::uint64_t sum, const Run& run) {
    const std::int64_t v = (static_cast<std::int64_t>(sum) * run.weight + (kOne >> 1)) >> kPrecisionBits;
    return static_cast<uint8_t>(v > 255 ? 255 : v);
}

// A run whose sums may reach 2^16, from the byte columns (rare: more than 257 samples).
void run_wide(const uint8_t* scratch, const Run& run, ptrdiff_t c, ptrdiff_t ch, uint8_t* res,
              int strip = kStrip) {
    for (int r = 0; r < strip; ++r) {
        std::uint64_t sum = 0;
        for (int32_t k = 0; k < run.count; ++k) sum += scratch[((run.start + k) * c + ch) * strip + r];
        res[r] = value_wide(sum, run);
    }
}

void runs_portable(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                   ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    uint8_t res[kStrip];
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            if (run.fits16) {
                const uint16_t* hi = prefix + ((run.start + run.count) * c + ch) * kStrip;
                const uint16_t* lo = prefix + (run.start * c + ch) * kStrip;
                for (int r = 0; r < kStrip; ++r) res[r] = value16(static_cast<uint16_t>(hi[r] - lo[r]), run);
            } else {
                run_wide(scratch, run, c, ch, res);
            }
            std::memcpy(dst + (j * c + ch) * dst_stride, res, static_cast<std::size_t>(rows));
        }
    }
}

void expand_portable(const uint8_t* srow, const ExpandPlan& plan, uint8_t* const* outs, ptrdiff_t n_outs) {
    uint8_t* first = outs[0];
    for (ptrdiff_t o = 0; o < plan.out_len; ++o) first[o] = srow[plan.src[o]];
    for (ptrdiff_t r = 1; r < n_outs; ++r) std::memcpy(outs[r], first, static_cast<std::size_t>(plan.out_len));
}

#if MMC_X86
// GCC 12 warns inside its own AVX-512 unpack intrinsics (_mm512_undefined_epi32).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// In-register transpose of 16 rows of V (per 128-bit lane): afterwards r[k] holds column k of the
// 16 rows in every lane (lane l: column 16 l + k). Four rounds interleave 8-, 16-, 32- and 64-bit
// elements of row pairs.
#define MMC_TRANSPOSE16(V, P)                                                          \
    do {                                                                               \
        V a_[16], b_[16];                                                              \
        for (int p = 0; p < 8; ++p) {                                                  \
            a_[p] = P##_unpacklo_epi8(r[2 * p], r[2 * p + 1]);     /* columns 0-7 */   \
            a_[8 + p] = P##_unpackhi_epi8(r[2 * p], r[2 * p + 1]); /* columns 8-15 */  \
        }                                                                              \
        for (int h = 0; h < 2; ++h) { /* b_[4 g + q]: columns 4g..4g+3, rows 4q..4q+3 */ \
            for (int q = 0; q < 4; ++q) {                                              \
                const V x0 = a_[8 * h + 2 * q], x1 = a_[8 * h + 2 * q + 1];            \
                b_[4 * (2 * h) + q] = P##_unpacklo_epi16(x0, x1);                      \
                b_[4 * (2 * h + 1) + q] = P##_unpackhi_epi16(x0, x1);                  \
            }                                                                          \
        }                                                                              \
        for (int g = 0; g < 4; ++g) { /* a_[2 k + o]: columns 2k, 2k+1, rows 8o..8o+7 */ \
            for (int o = 0; o < 2; ++o) {                                              \
                const V y0 = b_[4 * g + 2 * o], y1 = b_[4 * g + 2 * o + 1];            \
                a_[2 * (2 * g) + o] = P##_unpacklo_epi32(y0, y1);                      \
                a_[2 * (2 * g + 1) + o] = P##_unpackhi_epi32(y0, y1);                  \
            }                                                                          \
        }                                                                              \
        for (int k = 0; k < 8; ++k) {                                                  \
            r[2 * k] = P##_unpacklo_epi64(a_[2 * k], a_[2 * k + 1]);                   \
            r[2 * k + 1] = P##_unpackhi_epi64(a_[2 * k], a_[2 * k + 1]);               \
        }                                                                              \
    } while (0)

inline void transpose16_sse2(const uint8_t* const* rows, ptrdiff_t col, uint8_t* scratch,
                             ptrdiff_t stride = kStrip) {
    __m128i r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + col));
    MMC_TRANSPOSE16(__m128i, _mm);
    for (int k = 0; k < 16; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch + (col + k) * stride), r[k]);
}

void transpose_sse2(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch) {
    ptrdiff_t col = 0;
    for (; col + 16 <= ncols; col += 16) transpose16_sse2(rows, col, scratch);
    transpose_scalar(rows, col, ncols, scratch);
}

// SSE2: 16 lanes as two halves of 8 u16.
void prefix_sse2(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix) {
    const __m128i zero = _mm_setzero_si128();
    auto at = [&](ptrdiff_t i) { return reinterpret_cast<__m128i*>(prefix + i * kStrip); };
    for (ptrdiff_t ch = 0; ch < c; ++ch) _mm_storeu_si128(at(ch), zero), _mm_storeu_si128(at(ch) + 1, zero);
    if (c == 1) {
        __m128i lo = zero, hi = zero;
        for (ptrdiff_t i = 0; i < ncols; ++i) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scratch + i * kStrip));
            lo = _mm_add_epi16(lo, _mm_unpacklo_epi8(v, zero));
            hi = _mm_add_epi16(hi, _mm_unpackhi_epi8(v, zero));
            _mm_storeu_si128(at(i + 1), lo);
            _mm_storeu_si128(at(i + 1) + 1, hi);
        }
        return;
    }
    for (ptrdiff_t i = 0; i < ncols; ++i) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scratch + i * kStrip));
        _mm_storeu_si128(at(i + c), _mm_add_epi16(_mm_loadu_si128(at(i)), _mm_unpacklo_epi8(v, zero)));
        _mm_storeu_si128(at(i + c) + 1, _mm_add_epi16(_mm_loadu_si128(at(i) + 1), _mm_unpackhi_epi8(v, zero)));
    }
}

void runs_sse2(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
               ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    const __m128i half = _mm_set1_epi16(32);
    alignas(16) uint8_t res[kStrip];
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        const __m128i wh = _mm_set1_epi16(static_cast<short>(run.w_hi));
        const __m128i wl = _mm_set1_epi16(static_cast<short>(run.w_lo));
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            uint8_t* o = dst + (j * c + ch) * dst_stride;
            if (!run.fits16) {
                run_wide(scratch, run, c, ch, res);
                std::memcpy(o, res, static_cast<std::size_t>(rows));
                continue;
            }
            const __m128i* hi = reinterpret_cast<const __m128i*>(prefix + ((run.start + run.count) * c + ch) * kStrip);
            const __m128i* lo = reinterpret_cast<const __m128i*>(prefix + (run.start * c + ch) * kStrip);
            __m128i s0 = _mm_sub_epi16(_mm_loadu_si128(hi), _mm_loadu_si128(lo));
            __m128i s1 = _mm_sub_epi16(_mm_loadu_si128(hi + 1), _mm_loadu_si128(lo + 1));
            s0 = _mm_srli_epi16(_mm_add_epi16(_mm_add_epi16(_mm_mullo_epi16(s0, wh), _mm_mulhi_epu16(s0, wl)), half), 6);
            s1 = _mm_srli_epi16(_mm_add_epi16(_mm_add_epi16(_mm_mullo_epi16(s1, wh), _mm_mulhi_epu16(s1, wl)), half), 6);
            const __m128i v = _mm_packus_epi16(s0, s1);
            if (rows == kStrip) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v);
            } else {
                _mm_store_si128(reinterpret_cast<__m128i*>(res), v);
                std::memcpy(o, res, static_cast<std::size_t>(rows));
            }
        }
    }
}

#define MMC_AVX2 __attribute__((target("avx2")))

MMC_AVX2 void transpose_avx2_stride(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch,
                                    ptrdiff_t stride) {
    ptrdiff_t col = 0;
    for (; col + 32 <= ncols; col += 32) {
        __m256i r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + col));
        MMC_TRANSPOSE16(__m256i, _mm256);
        for (int k = 0; k < 16; ++k) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch + (col + k) * stride), _mm256_castsi256_si128(r[k]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch + (col + 16 + k) * stride),
                             _mm256_extracti128_si256(r[k], 1));
        }
    }
    for (; col + 16 <= ncols; col += 16) transpose16_sse2(rows, col, scratch, stride);
    transpose_scalar(rows, col, ncols, scratch, stride);
}

MMC_AVX2 void transpose_avx2(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch) {
    transpose_avx2_stride(rows, ncols, scratch, kStrip);
}

MMC_AVX2 inline __m256i widen16(const uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

MMC_AVX2 void prefix_avx2(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix) {
    auto at = [&](ptrdiff_t i) { return reinterpret_cast<__m256i*>(prefix + i * kStrip); };
    const __m256i zero = _mm256_setzero_si256();
    for (ptrdiff_t ch = 0; ch < c; ++ch) _mm256_storeu_si256(at(ch), zero);
    if (c == 1) {
        __m256i a = zero;
        for (ptrdiff_t i = 0; i < ncols; ++i) {
            a = _mm256_add_epi16(a, widen16(scratch + i * kStrip));
            _mm256_storeu_si256(at(i + 1), a);
        }
    } else if (c == 3) {  // ncols is a multiple of 3
        __m256i a0 = zero, a1 = zero, a2 = zero;
        for (ptrdiff_t i = 0; i < ncols; i += 3) {
            a0 = _mm256_add_epi16(a0, widen16(scratch + i * kStrip));
            a1 = _mm256_add_epi16(a1, widen16(scratch + (i + 1) * kStrip));
            a2 = _mm256_add_epi16(a2, widen16(scratch + (i + 2) * kStrip));
            _mm256_storeu_si256(at(i + 3), a0);
            _mm256_storeu_si256(at(i + 4), a1);
            _mm256_storeu_si256(at(i + 5), a2);
        }
    } else {
        for (ptrdiff_t i = 0; i < ncols; ++i)
            _mm256_storeu_si256(at(i + c), _mm256_add_epi16(_mm256_loadu_si256(at(i)), widen16(scratch + i * kStrip)));
    }
}

MMC_AVX2 void runs_avx2(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                        ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    const __m256i half = _mm256_set1_epi16(32);
    alignas(16) uint8_t res[kStrip];
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        const __m256i wh = _mm256_set1_epi16(static_cast<short>(run.w_hi));
        const __m256i wl = _mm256_set1_epi16(static_cast<short>(run.w_lo));
        const uint16_t* hi = prefix + (run.start + run.count) * c * kStrip;
        const uint16_t* lo = prefix + run.start * c * kStrip;
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            uint8_t* o = dst + (j * c + ch) * dst_stride;
            if (!run.fits16) {
                run_wide(scratch, run, c, ch, res);
                std::memcpy(o, res, static_cast<std::size_t>(rows));
                continue;
            }
            __m256i s = _mm256_sub_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + ch * kStrip)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + ch * kStrip)));
            s = _mm256_srli_epi16(
                _mm256_add_epi16(_mm256_add_epi16(_mm256_mullo_epi16(s, wh), _mm256_mulhi_epu16(s, wl)), half), 6);
            const __m128i v = _mm_packus_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            if (rows == kStrip) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v);
            } else {
                _mm_store_si128(reinterpret_cast<__m128i*>(res), v);
                std::memcpy(o, res, static_cast<std::size_t>(rows));
            }
        }
    }
}

// Gather with 16-byte chunks reading a 32-byte window: two byte shuffles and a blend.
MMC_AVX2 void expand_avx2(const uint8_t* srow, const ExpandPlan& plan, uint8_t* const* outs, ptrdiff_t n_outs) {
    const ptrdiff_t full = plan.simd ? plan.out_len / 16 : 0;
    const __m128i fifteen = _mm_set1_epi8(15);
    for (ptrdiff_t k = 0; k < full; ++k) {
        const uint8_t* s = srow + plan.base[k];
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
        const __m128i idx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(plan.idx.data() + k * 16));
        const __m128i v = _mm_blendv_epi8(_mm_shuffle_epi8(lo, idx), _mm_shuffle_epi8(hi, idx),
                                          _mm_cmpgt_epi8(idx, fifteen));
        for (ptrdiff_t r = 0; r < n_outs; ++r) _mm_storeu_si128(reinterpret_cast<__m128i*>(outs[r] + k * 16), v);
    }
    for (ptrdiff_t o = full * 16; o < plan.out_len; ++o) {
        const uint8_t v = srow[plan.src[o]];
        for (ptrdiff_t r = 0; r < n_outs; ++r) outs[r][o] = v;
    }
}

// 16 rows with column stride `stride`.
MMC_AVX512 void transpose16_avx512(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch,
                                   ptrdiff_t stride) {
    ptrdiff_t col = 0;
    for (; col + 64 <= ncols; col += 64) {
        __m512i r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows[i] + col);
        MMC_TRANSPOSE16(__m512i, _mm512);
        for (int k = 0; k < 16; ++k) {  // lane l holds column 16 l + k
            uint8_t* b = scratch + (col + k) * stride;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b), _mm512_castsi512_si128(r[k]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 16 * stride), _mm512_extracti32x4_epi32(r[k], 1));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 32 * stride), _mm512_extracti32x4_epi32(r[k], 2));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b + 48 * stride), _mm512_extracti32x4_epi32(r[k], 3));
        }
    }
    if (col < ncols) {
        const uint8_t* shifted[16];
        for (int i = 0; i < 16; ++i) shifted[i] = rows[i] + col;
        transpose_avx2_stride(shifted, ncols - col, scratch + col * stride, stride);
    }
}

constexpr int kStrip512 = 32;

MMC_AVX512 void transpose_avx512(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch) {
    transpose16_avx512(rows, ncols, scratch, kStrip512);
    transpose16_avx512(rows + 16, ncols, scratch + 16, kStrip512);
}

MMC_AVX512 inline __m512i widen32(const uint8_t* p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

MMC_AVX512 void prefix_avx512(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix) {
    constexpr int S = kStrip512;
    auto at = [&](ptrdiff_t i) { return prefix + i * S; };
    const __m512i zero = _mm512_setzero_si512();
    for (ptrdiff_t ch = 0; ch < c; ++ch) _mm512_storeu_si512(at(ch), zero);
    if (c == 1) {
        __m512i a = zero;
        for (ptrdiff_t i = 0; i < ncols; ++i) {
            a = _mm512_add_epi16(a, widen32(scratch + i * S));
            _mm512_storeu_si512(at(i + 1), a);
        }
    } else if (c == 3) {  // ncols is a multiple of 3
        __m512i a0 = zero, a1 = zero, a2 = zero;
        for (ptrdiff_t i = 0; i < ncols; i += 3) {
            a0 = _mm512_add_epi16(a0, widen32(scratch + i * S));
            a1 = _mm512_add_epi16(a1, widen32(scratch + (i + 1) * S));
            a2 = _mm512_add_epi16(a2, widen32(scratch + (i + 2) * S));
            _mm512_storeu_si512(at(i + 3), a0);
            _mm512_storeu_si512(at(i + 4), a1);
            _mm512_storeu_si512(at(i + 5), a2);
        }
    } else {
        for (ptrdiff_t i = 0; i < ncols; ++i)
            _mm512_storeu_si512(at(i + c), _mm512_add_epi16(_mm512_loadu_si512(at(i)), widen32(scratch + i * S)));
    }
}

MMC_AVX512 void runs_avx512(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                            ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    constexpr int S = kStrip512;
    const __m512i half = _mm512_set1_epi16(32);
    alignas(32) uint8_t res[S];
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        const __m512i wh = _mm512_set1_epi16(static_cast<short>(run.w_hi));
        const __m512i wl = _mm512_set1_epi16(static_cast<short>(run.w_lo));
        const uint16_t* hi = prefix + (run.start + run.count) * c * S;
        const uint16_t* lo = prefix + run.start * c * S;
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            uint8_t* o = dst + (j * c + ch) * dst_stride;
            if (!run.fits16) {
                run_wide(scratch, run, c, ch, res, S);
                std::memcpy(o, res, static_cast<std::size_t>(rows));
                continue;
            }
            __m512i v = _mm512_sub_epi16(_mm512_loadu_si512(hi + ch * S), _mm512_loadu_si512(lo + ch * S));
            v = _mm512_srli_epi16(
                _mm512_add_epi16(_mm512_add_epi16(_mm512_mullo_epi16(v, wh), _mm512_mulhi_epu16(v, wl)), half), 6);
            const __m256i b = _mm512_cvtepi16_epi8(v);  // values are <= 255
            if (rows == S) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), b);
            } else {
                _mm_mask_storeu_epi8(o, static_cast<__mmask16>((1u << std::min(rows, 16)) - 1),
                                     _mm256_castsi256_si128(b));
                if (rows > 16) {
                    _mm_mask_storeu_epi8(o + 16, static_cast<__mmask16>((1u << (rows - 16)) - 1),
                                         _mm256_extracti128_si256(b, 1));
                }
            }
        }
    }
}

// Gather with 64-byte chunks reading a 128-byte window (vpermi2b).
MMC_AVX512 void expand_avx512(const uint8_t* srow, const ExpandPlan& plan, uint8_t* const* outs, ptrdiff_t n_outs) {
    if (!plan.simd) return expand_portable(srow, plan, outs, n_outs);
    const ptrdiff_t n_chunks = (plan.out_len + 63) / 64;
    for (ptrdiff_t k = 0; k < n_chunks; ++k) {
        const uint8_t* s = srow + plan.base[k];
        const __m512i idx = _mm512_loadu_si512(plan.idx.data() + k * 64);
        const __m512i v = _mm512_permutex2var_epi8(_mm512_loadu_si512(s), idx, _mm512_loadu_si512(s + 64));
        const ptrdiff_t left = plan.out_len - k * 64;
        if (left >= 64) {
            for (ptrdiff_t r = 0; r < n_outs; ++r) _mm512_storeu_si512(outs[r] + k * 64, v);
        } else {
            const __mmask64 m = (std::uint64_t{1} << left) - 1;
            for (ptrdiff_t r = 0; r < n_outs; ++r) _mm512_mask_storeu_epi8(outs[r] + k * 64, m, v);
        }
    }
}
#endif

StripOps portable_ops() {
    return {kStrip, transpose_portable, prefix_portable, runs_portable, expand_portable, 0, 0, "portable"};
}

// The kernels of one instruction set by name, if this CPU runs it: "avx512" (cpu_has_avx512()),
// "avx2", "sse2" (x86-64 baseline) or "portable" (plain C++).
bool ops_named(const std::string& name, StripOps& out) {
    if (name == "portable") return out = portable_ops(), true;
#if MMC_X86
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2");
    const bool avx512 = cpu_has_avx512();
    if (name == "avx512" && avx512) {
        return out = {kStrip512, transpose_avx512, prefix_avx512, runs_avx512, expand_avx512, 64, 128, "avx512"}, true;
    }
    if (name == "avx2" && avx2) {
        return out = {kStrip, transpose_avx2, prefix_avx2, runs_avx2, expand_avx2, 16, 32, "avx2"}, true;
    }
    if (name == "sse2") return out = {kStrip, transpose_sse2, prefix_sse2, runs_sse2, expand_portable, 0, 0, "sse2"}, true;
#endif
    return false;
}

StripOps best_ops() {
    StripOps o = portable_ops();
    for (const char* name : {"avx512", "avx2", "sse2"}) {
        if (ops_named(name, o)) break;
    }
    return o;
}

// Chosen once at load time; tests may switch it (set_isa) to check every path on one machine.
StripOps ops = best_ops();

// Bytes the gather may read past the end of the small image.
constexpr ptrdiff_t kExpandPad = 128;

std::shared_ptr<const ExpandPlan> expand_plan(const AxisTable& tx, ptrdiff_t in, ptrdiff_t out, ptrdiff_t c) {
    return cached<std::tuple<ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t>, ExpandPlan>(
        std::make_tuple(in, out, c, ptrdiff_t{ops.expand_chunk}), [&] { return make_expand_plan(tx, c, ops.expand_chunk, ops.expand_window); });
}

// ---------------------------------------------------------------------------------------------
// Passes.

// One resampling pass along the inner axis, written transposed: src has n_rows rows (row stride
// src_stride) of `len` pixels of c bytes; dst[(j * c + ch) * dst_stride + r] is output sample j,
// channel ch, of row r.
void reduce_transposed(const uint8_t* src, ptrdiff_t n_rows, ptrdiff_t src_stride, ptrdiff_t len,
                       ptrdiff_t c, const AxisTable& table, uint8_t* dst, ptrdiff_t dst_stride,
                       Workspace& ws) {
    const ptrdiff_t ncols = len * c;
    const int strip = ops.strip;
    uint8_t* scratch = grow(ws.scratch, ncols * strip);
    uint16_t* prefix = grow(ws.prefix, (ncols + c) * strip);
    const uint8_t* rows[kStripMax];
    const ptrdiff_t n_runs = static_cast<ptrdiff_t>(table.runs.size());
    for (ptrdiff_t r0 = 0; r0 < n_rows; r0 += strip) {
        const int here = static_cast<int>(std::min<ptrdiff_t>(strip, n_rows - r0));
        for (int i = 0; i < strip; ++i) rows[i] = src + (r0 + std::min(i, here - 1)) * src_stride;  // pad: last row
        ops.transpose(rows, ncols, scratch);
        ops.prefix(scratch, ncols, c, prefix);
        ops.runs(prefix, scratch, table.runs.data(), n_runs, c, dst + r0, dst_stride, here);
    }
}

// Vertical pass in row-major order: dst row j = (2^21 + W_j * sum of the run's src rows) >> 22,
// rows of n bytes.
MMC_CLONES void vertical_pass(const uint8_t* __restrict src, ptrdiff_t n, const Run* runs, ptrdiff_t n_runs,
                              uint8_t* __restrict dst, uint16_t* __restrict acc) {
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        uint8_t* o = dst + j * n;
        if (run.fits16) {
            std::fill(acc, acc + n, uint16_t{0});
            for (int32_t k = 0; k < run.count; ++k) {
                const uint8_t* v = src + (run.start + k) * n;
                for (ptrdiff_t i = 0; i < n; ++i) acc[i] = static_cast<uint16_t>(acc[i] + v[i]);
            }
            for (ptrdiff_t i = 0; i < n; ++i) o[i] = value16(acc[i], run);
        } else {
            for (ptrdiff_t i = 0; i < n; ++i) {
                std::uint64_t sum = 0;
                for (int32_t k = 0; k < run.count; ++k) sum += src[(run.start + k) * n + i];
                o[i] = value_wide(sum, run);
            }
        }
    }
}

// Pillow 13 runs the vertical pass first when both passes are needed and the height shrinks by
// more than twice as many pixels as the width: (in_h - out_h) > 2 * (in_w - out_w)
// (python-pillow/Pillow#9549). The rule was measured on Pillow 13.0.0 and is checked by
// tests/test_resample.py.
bool vertical_first(ptrdiff_t h, ptrdiff_t w, ptrdiff_t oh, ptrdiff_t ow) {
    return h != oh && w != ow && (h - oh) > 2 * (w - ow);
}

// Pillow BOX resize of src (h, w, c) to dst (oh, ow, c).
void resize_impl(const uint8_t* src, ptrdiff_t h, ptrdiff_t w, ptrdiff_t c, uint8_t* dst, ptrdiff_t oh,
                 ptrdiff_t ow, const AxisTable& tx, const AxisTable& ty, Workspace& ws) {
    if (!vertical_first(h, w, oh, ow)) {
        // Horizontal pass: (h rows, w pixels) -> tmp (ow * c rows, h bytes), transposed.
        uint8_t* tmp = grow(ws.tmp, ow * c * h);
        reduce_transposed(src, h, w * c, w, c, tx, tmp, h, ws);
        // Vertical pass, transposing back: (ow * c rows, h samples) -> dst (oh rows, ow * c).
        reduce_transposed(tmp, ow * c, h, h, 1, ty, dst, ow * c, ws);
        return;
    }
    // Vertical pass in row-major order: (h, w * c) -> rows (oh, w * c).
    uint8_t* rows = grow(ws.rows, oh * w * c);
    vertical_pass(src, w * c, ty.runs.data(), oh, rows, grow(ws.acc, w * c));
    // Horizontal pass, transposed, -> (ow * c rows, oh bytes); then back to row-major order with
    // an identity table (one sample of weight 2^22 per output: a copy).
    uint8_t* tmp = grow(ws.tmp, ow * c * oh);
    reduce_transposed(rows, oh, w * c, w, c, tx, tmp, oh, ws);
    reduce_transposed(tmp, ow * c, oh, oh, 1, *axis_table(oh, oh), dst, ow * c, ws);
}

// Nearest upsampling (every run one sample of weight 2^22) of small (sh, sw, c) to dst (h, w, c):
// each small row is expanded once, straight into every output row that repeats it.
void upsample_nearest(const uint8_t* small, ptrdiff_t sw, ptrdiff_t c, uint8_t* dst, ptrdiff_t h,
                      const AxisTable& ty, const ExpandPlan& plan, Workspace& ws) {
    const ptrdiff_t orow = plan.out_len;
    uint8_t** outs = grow(ws.outs, h);
    for (ptrdiff_t y = 0; y < h;) {
        const int32_t s = ty.runs[y].start;
        ptrdiff_t n = 0;
        for (; y < h && ty.runs[y].start == s; ++y) outs[n++] = dst + y * orow;
        ops.expand(small + s * sw * c, plan, outs, n);
    }
}

ptrdiff_t check_side(ptrdiff_t v, const char* fn, const char* name) {
    if (v < 1 || v >= kMaxSide) {
        throw std::invalid_argument(std::string(fn) + ": " + name + " must be in [1, 2**24), got " + std::to_string(v));
    }
    return v;
}

Shape checked_shape(const ImageIn& image, const char* fn, ptrdiff_t width, ptrdiff_t height) {
    const Shape s = image_shape(image, fn);
    check_side(width, fn, "width");
    check_side(height, fn, "height");
    check_side(s.w, fn, "the image width");
    check_side(s.h, fn, "the image height");
    return s;
}

thread_local Workspace workspace;

ImageOut resize_box(const ImageIn& image, ptrdiff_t width, ptrdiff_t height) {
    const Shape s = checked_shape(image, "resize_box", width, height);
    ImageOut out = ImageOut({height, width, s.c});
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        Workspace& ws = workspace;
        resize_impl(src, s.h, s.w, s.c, dst, height, width, *axis_table(s.w, width), *axis_table(s.h, height), ws);
        trim(ws);
    }
    return out;
}

ImageOut pixelate(const ImageIn& image, ptrdiff_t width, ptrdiff_t height) {
    const Shape s = checked_shape(image, "pixelate", width, height);
    ImageOut out = new_image(s);
    const uint8_t* src = image.data();
    uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        Workspace& ws = workspace;
        uint8_t* small = grow(ws.small, height * width * s.c + kExpandPad);
        resize_impl(src, s.h, s.w, s.c, small, height, width, *axis_table(s.w, width), *axis_table(s.h, height), ws);
        const auto ux = axis_table(width, s.w);
        const auto uy = axis_table(height, s.h);
        if (ux->nearest && uy->nearest) {
            upsample_nearest(small, width, s.c, dst, s.h, *uy, *expand_plan(*ux, width, s.w, s.c), ws);
        } else {
            resize_impl(small, height, width, s.c, dst, s.h, s.w, *ux, *uy, ws);
        }
        trim(ws);
    }
    return out;
}

std::string get_isa() { return ops.name; }

bool set_isa(const std::string& name) {
    StripOps o = ops;
    if (!ops_named(name, o)) return false;
    ops = o;
    return true;
}

}  // namespace

void register_resample(py::module_& m) {
    m.def("_resample_isa", &get_isa, "Instruction set of the resampling kernels (testing aid).");
    m.def("_set_resample_isa", &set_isa, py::arg("name"),
          "Switch the resampling kernels to 'avx512', 'avx2', 'sse2' or 'portable' if this CPU runs "
          "them; returns whether it did. Testing aid: not thread-safe.");
    m.def("resize_box", &resize_box, py::arg("image"), py::arg("width"), py::arg("height"),
          "Pillow Image.resize((width, height), Image.BOX) of an 8-bit image, bit for bit (see _native.pyi).");
    m.def("pixelate", &pixelate, py::arg("image"), py::arg("width"), py::arg("height"),
          "BOX resize to (width, height) and back to the image's size, as two Pillow BOX resizes, bit for "
          "bit (see _native.pyi).");
}

}  // namespace mmc
