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
// Implementation. A pass along the rows' inner axis is done on strips of 16 rows (32 with
// AVX-512): the strip is transposed in registers (SSE2 / AVX2 / AVX-512 unpacks) into a scratch
// block whose columns are 16- (32-) byte vectors, running 16-bit sums along the columns are formed (modulo 2^16, exact for run
// sums below 2^16), and each run is the difference of two of them, scaled in 16-bit lanes. Its
// result is written transposed, so applying it twice (horizontal, then vertical) lands back in
// row-major order. The pixelate upsampling is a byte-permute gather (AVX-512 VBMI or SSSE3
// shuffles) of each small row, stored to every output row that repeats it. The SSE2, AVX2 and
// AVX-512 strip kernels are one set of templates over small vector-traits structs (V128, V256,
// V512), plus a portable C++ set; the ISA is picked at run time (StripOps). All paths use integer
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
#include <type_traits>
#include <utility>
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

constexpr int kStrip = 16;  // S of the portable kernels (and of V128, V256)
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

// Output rows [0, rows) of a run whose sums may reach 2^16, from the byte columns, to o (rare:
// more than 257 samples; kept out of line so that the vector loops hold their constants in
// registers).
__attribute__((noinline, cold)) void run_wide(const uint8_t* scratch, const Run& run, ptrdiff_t c,
                                              ptrdiff_t ch, uint8_t* o, int rows, int strip) {
    for (int r = 0; r < rows; ++r) {
        std::uint64_t sum = 0;
        for (int32_t k = 0; k < run.count; ++k) sum += scratch[((run.start + k) * c + ch) * strip + r];
        o[r] = value_wide(sum, run);
    }
}

void runs_portable(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                   ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    uint8_t res[kStrip];
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            uint8_t* o = dst + (j * c + ch) * dst_stride;
            if (!run.fits16) {
                run_wide(scratch, run, c, ch, o, rows, kStrip);
                continue;
            }
            const uint16_t* hi = prefix + ((run.start + run.count) * c + ch) * kStrip;
            const uint16_t* lo = prefix + (run.start * c + ch) * kStrip;
            for (int r = 0; r < kStrip; ++r) res[r] = value16(static_cast<uint16_t>(hi[r] - lo[r]), run);
            std::memcpy(o, res, static_cast<std::size_t>(rows));
        }
    }
}

void expand_portable(const uint8_t* srow, const ExpandPlan& plan, uint8_t* const* outs, ptrdiff_t n_outs) {
    uint8_t* first = outs[0];
    for (ptrdiff_t o = 0; o < plan.out_len; ++o) first[o] = srow[plan.src[o]];
    for (ptrdiff_t r = 1; r < n_outs; ++r) std::memcpy(outs[r], first, static_cast<std::size_t>(plan.out_len));
}

#if MMC_X86
// GCC 12 warns inside its own AVX-512 unpack intrinsics (_mm512_undefined_epi32), and about the
// vector ABI of the generic kernels' bodies, which are only ever inlined into functions compiled
// for their target (see MMC_STRIP_KERNELS), never emitted on their own.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

#define MMC_AVX2 __attribute__((target("avx2")))

// Vector traits. The members every width shares are spelled once: P is the intrinsics prefix
// (_mm, _mm256, _mm512), BITS the register width and ATTR the target attribute of its ISA; NEXT
// is the next narrower traits (void for none), for the transpose's tail, and STRIP the rows per
// strip of the strip kernels. Arithmetic is on 16-bit lanes; the unpacks interleave 8- to 64-bit
// elements within each 128-bit lane.
#define MMC_VEC_OPS(ATTR, P, BITS, NEXT, STRIP)                                                  \
    using T = __m##BITS##i;                                                                      \
    using Next = NEXT;                                                                           \
    static constexpr int kBytes = BITS / 8, kStrip = STRIP;                                      \
    ATTR static T load(const void* p) { return P##_loadu_si##BITS(static_cast<const T*>(p)); }   \
    ATTR static void store(void* p, T v) { P##_storeu_si##BITS(static_cast<T*>(p), v); }         \
    ATTR static T zero() { return P##_setzero_si##BITS(); }                                      \
    ATTR static T set1(uint16_t x) { return P##_set1_epi16(static_cast<short>(x)); }             \
    ATTR static T add(T a, T b) { return P##_add_epi16(a, b); }                                  \
    ATTR static T sub(T a, T b) { return P##_sub_epi16(a, b); }                                  \
    /* (2^21 + S * W) >> 22 as (S * w_hi + ((S * w_lo) >> 16) + 32) >> 6 (see make_run) */      \
    ATTR static T value16(T s, T wh, T wl, T half) {                                             \
        return P##_srli_epi16(P##_add_epi16(P##_add_epi16(P##_mullo_epi16(s, wh),                \
                                                          P##_mulhi_epu16(s, wl)), half), 6);    \
    }                                                                                            \
    ATTR static T lo8(T a, T b) { return P##_unpacklo_epi8(a, b); }                              \
    ATTR static T hi8(T a, T b) { return P##_unpackhi_epi8(a, b); }                              \
    ATTR static T lo16(T a, T b) { return P##_unpacklo_epi16(a, b); }                            \
    ATTR static T hi16(T a, T b) { return P##_unpackhi_epi16(a, b); }                            \
    ATTR static T lo32(T a, T b) { return P##_unpacklo_epi32(a, b); }                            \
    ATTR static T hi32(T a, T b) { return P##_unpackhi_epi32(a, b); }                            \
    ATTR static T lo64(T a, T b) { return P##_unpacklo_epi64(a, b); }                            \
    ATTR static T hi64(T a, T b) { return P##_unpackhi_epi64(a, b); }

// 16 bytes of v to o, of which only the first `rows` when rows < 16.
inline void store_rows16(uint8_t* o, __m128i v, int rows) {
    if (rows == 16) return _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v);
    alignas(16) uint8_t res[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(res), v);
    std::memcpy(o, res, static_cast<std::size_t>(rows));
}

// Besides MMC_VEC_OPS, each width gives lane<L>(v), its 128-bit lane L; widen(p), kBytes / 2
// bytes from p zero-extended to 16 bits; and store_bytes(o, s, rows): the strip column
// s[0 .. 2 * kStrip / kBytes) of kStrip 16-bit values <= 255 narrowed to bytes, its first `rows`
// stored to o.
struct V128 {  // SSE2 (x86-64 baseline): a strip column of 16 rows is two registers
    MMC_VEC_OPS(, _mm, 128, void, 16)
    template <int L> static T lane(T v) { return v; }
    static T widen(const uint8_t* p) { return lo8(_mm_loadl_epi64(reinterpret_cast<const T*>(p)), zero()); }
    static void store_bytes(uint8_t* o, const T* s, int rows) { store_rows16(o, _mm_packus_epi16(s[0], s[1]), rows); }
};

struct V256 {  // AVX2
    MMC_VEC_OPS(MMC_AVX2, _mm256, 256, V128, 16)
    template <int L> MMC_AVX2 static __m128i lane(T v) { return _mm256_extracti128_si256(v, L); }
    MMC_AVX2 static T widen(const uint8_t* p) { return _mm256_cvtepu8_epi16(V128::load(p)); }
    MMC_AVX2 static void store_bytes(uint8_t* o, const T* s, int rows) {
        store_rows16(o, _mm_packus_epi16(lane<0>(s[0]), lane<1>(s[0])), rows);
    }
};

struct V512 {  // AVX-512 (the MMC_AVX512 level): strips of 32 rows
    MMC_VEC_OPS(MMC_AVX512, _mm512, 512, V256, 32)
    template <int L> MMC_AVX512 static __m128i lane(T v) { return _mm512_extracti32x4_epi32(v, L); }
    MMC_AVX512 static T widen(const uint8_t* p) { return _mm512_cvtepu8_epi16(V256::load(p)); }
    MMC_AVX512 static void store_bytes(uint8_t* o, const T* s, int rows) {
        const __m256i b = _mm512_cvtepi16_epi8(s[0]);  // values are <= 255
        if (rows == 32) return V256::store(o, b);
        _mm256_mask_storeu_epi8(o, static_cast<__mmask32>((std::uint64_t{1} << rows) - 1), b);
    }
};

// The 128-bit lanes of v to p, p + step, p + 2 step, ...
template <class V, int... L>
inline void store_lanes(uint8_t* p, typename V::T v, ptrdiff_t step, std::integer_sequence<int, L...>) {
    (V128::store(p + L * step, V::template lane<L>(v)), ...);
}

// Generic strip kernels. They call the traits' target-specific functions, which GCC inlines only
// into functions compiled for that target: each is instantiated inside an entry function with the
// ISA's target attribute and `flatten` (MMC_STRIP_KERNELS), never called on its own.

// In-register transpose of 16 rows (per 128-bit lane): afterwards r[k] holds column k of the 16
// rows in every lane (lane l: column 16 l + k). Four rounds interleave 8-, 16-, 32- and 64-bit
// elements of row pairs.
template <class V>
inline void transpose16(typename V::T* r) {
    typename V::T a[16], b[16];
    for (int p = 0; p < 8; ++p) {
        a[p] = V::lo8(r[2 * p], r[2 * p + 1]);      // columns 0-7
        a[8 + p] = V::hi8(r[2 * p], r[2 * p + 1]);  // columns 8-15
    }
    for (int h = 0; h < 2; ++h) {  // b[4 g + q]: columns 4g..4g+3, rows 4q..4q+3
        for (int q = 0; q < 4; ++q) {
            b[4 * (2 * h) + q] = V::lo16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
            b[4 * (2 * h + 1) + q] = V::hi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
        }
    }
    for (int g = 0; g < 4; ++g) {  // a[2 k + o]: columns 2k, 2k+1, rows 8o..8o+7
        for (int o = 0; o < 2; ++o) {
            a[2 * (2 * g) + o] = V::lo32(b[4 * g + 2 * o], b[4 * g + 2 * o + 1]);
            a[2 * (2 * g + 1) + o] = V::hi32(b[4 * g + 2 * o], b[4 * g + 2 * o + 1]);
        }
    }
    for (int k = 0; k < 8; ++k) {
        r[2 * k] = V::lo64(a[2 * k], a[2 * k + 1]);
        r[2 * k + 1] = V::hi64(a[2 * k], a[2 * k + 1]);
    }
}

// 16 rows, columns [col, ncols), column stride `stride` in scratch: blocks of V::kBytes columns,
// then of the narrower widths, then one column at a time.
template <class V>
inline void transpose_cols(const uint8_t* const* rows, ptrdiff_t col, ptrdiff_t ncols, uint8_t* scratch,
                           ptrdiff_t stride) {
    for (; col + V::kBytes <= ncols; col += V::kBytes) {
        typename V::T r[16];
        for (int i = 0; i < 16; ++i) r[i] = V::load(rows[i] + col);
        transpose16<V>(r);
        for (int k = 0; k < 16; ++k) {
            store_lanes<V>(scratch + (col + k) * stride, r[k], 16 * stride,
                           std::make_integer_sequence<int, V::kBytes / 16>{});
        }
    }
    if constexpr (std::is_void_v<typename V::Next>) {
        transpose_scalar(rows, col, ncols, scratch, stride);
    } else {
        transpose_cols<typename V::Next>(rows, col, ncols, scratch, stride);
    }
}

template <class V>
inline void transpose_simd(const uint8_t* const* rows, ptrdiff_t ncols, uint8_t* scratch) {
    for (int r0 = 0; r0 < V::kStrip; r0 += 16) transpose_cols<V>(rows + r0, 0, ncols, scratch + r0, V::kStrip);
}

// A strip column of S = V::kStrip 16-bit values is kN registers of kL lanes.
template <class V>
struct StripCols {
    static constexpr int kL = V::kBytes / 2, kN = V::kStrip / kL;
    static uint16_t* at(uint16_t* prefix, ptrdiff_t i, int q) { return prefix + i * V::kStrip + q * kL; }
    static typename V::T col(const uint8_t* scratch, ptrdiff_t i, int q) {
        return V::widen(scratch + i * V::kStrip + q * kL);
    }
};

// Prefix sums of C channels held in registers, column by column (ncols is a multiple of C).
template <class V, int C>
inline void prefix_regs(const uint8_t* scratch, ptrdiff_t ncols, uint16_t* prefix) {
    using K = StripCols<V>;
    typename V::T a[C][K::kN];
    for (int k = 0; k < C; ++k) {
        for (int q = 0; q < K::kN; ++q) a[k][q] = V::zero();
    }
    for (ptrdiff_t i = 0; i < ncols; i += C) {
        for (int k = 0; k < C; ++k) {
            for (int q = 0; q < K::kN; ++q) {
                a[k][q] = V::add(a[k][q], K::col(scratch, i + k, q));
                V::store(K::at(prefix, i + k + C, q), a[k][q]);
            }
        }
    }
}

template <class V>
inline void prefix_simd(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, uint16_t* prefix) {
    using K = StripCols<V>;
    for (ptrdiff_t ch = 0; ch < c; ++ch) {
        for (int q = 0; q < K::kN; ++q) V::store(K::at(prefix, ch, q), V::zero());
    }
    if (c == 1) return prefix_regs<V, 1>(scratch, ncols, prefix);
    if (c == 3) return prefix_regs<V, 3>(scratch, ncols, prefix);
    for (ptrdiff_t i = 0; i < ncols; ++i) {
        for (int q = 0; q < K::kN; ++q) {
            V::store(K::at(prefix, i + c, q), V::add(V::load(K::at(prefix, i, q)), K::col(scratch, i, q)));
        }
    }
}

template <class V>
inline void runs_simd(const uint16_t* prefix, const uint8_t* scratch, const Run* runs, ptrdiff_t n_runs,
                      ptrdiff_t c, uint8_t* dst, ptrdiff_t dst_stride, int rows) {
    using T = typename V::T;
    constexpr int S = V::kStrip, kL = StripCols<V>::kL, kN = StripCols<V>::kN;
    const T half = V::set1(32);
    for (ptrdiff_t j = 0; j < n_runs; ++j) {
        const Run& run = runs[j];
        uint8_t* o = dst + j * c * dst_stride;
        if (!run.fits16) {
            for (ptrdiff_t ch = 0; ch < c; ++ch) run_wide(scratch, run, c, ch, o + ch * dst_stride, rows, S);
            continue;
        }
        const T wh = V::set1(run.w_hi), wl = V::set1(run.w_lo);
        const uint16_t* hi = prefix + (run.start + run.count) * c * S;
        const uint16_t* lo = prefix + run.start * c * S;
        for (ptrdiff_t ch = 0; ch < c; ++ch) {
            T s[kN];
            for (int q = 0; q < kN; ++q) {
                const ptrdiff_t at = ch * S + q * kL;
                s[q] = V::value16(V::sub(V::load(hi + at), V::load(lo + at)), wh, wl, half);
            }
            V::store_bytes(o + ch * dst_stride, s, rows);
        }
    }
}

// The strip kernels of one ISA: transpose_ISA, prefix_ISA and runs_ISA (see StripOps).
#define MMC_STRIP_KERNELS(ATTR, ISA, V)                                                                  \
    ATTR __attribute__((flatten)) void transpose_##ISA(const uint8_t* const* rows, ptrdiff_t ncols,      \
                                                       uint8_t* scratch) {                               \
        transpose_simd<V>(rows, ncols, scratch);                                                         \
    }                                                                                                    \
    ATTR __attribute__((flatten)) void prefix_##ISA(const uint8_t* scratch, ptrdiff_t ncols, ptrdiff_t c, \
                                                    uint16_t* prefix) {                                  \
        prefix_simd<V>(scratch, ncols, c, prefix);                                                       \
    }                                                                                                    \
    ATTR __attribute__((flatten)) void runs_##ISA(const uint16_t* prefix, const uint8_t* scratch,         \
                                                  const Run* runs, ptrdiff_t n_runs, ptrdiff_t c,        \
                                                  uint8_t* dst, ptrdiff_t dst_stride, int rows) {        \
        runs_simd<V>(prefix, scratch, runs, n_runs, c, dst, dst_stride, rows);                           \
    }

MMC_STRIP_KERNELS(, sse2, V128)
MMC_STRIP_KERNELS(MMC_AVX2, avx2, V256)
MMC_STRIP_KERNELS(MMC_AVX512, avx512, V512)

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
        return out = {V512::kStrip, transpose_avx512, prefix_avx512, runs_avx512, expand_avx512, 64, 128, "avx512"}, true;
    }
    if (name == "avx2" && avx2) {
        return out = {V256::kStrip, transpose_avx2, prefix_avx2, runs_avx2, expand_avx2, 16, 32, "avx2"}, true;
    }
    if (name == "sse2") return out = {V128::kStrip, transpose_sse2, prefix_sse2, runs_sse2, expand_portable, 0, 0, "sse2"}, true;
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
