// HSV channel shift (MedMNIST-C saturate; the pathology suite's brightness, saturate and hue).
//
// Per pixel: x / 255.0 -> scikit-image rgb2hsv -> shift one channel -> hsv2rgb ->
// clip(0, 1) * 255 -> truncation to uint8, with scikit-image's float64 operations in their order,
// so the bytes are those of the NumPy pipeline (reference Saturate in
// medmnistc/corruptions/enhance.py; Zhang et al., MICCAI 2022, for the H and V shifts).
//
// The per-pixel branches of rgb2hsv (which channel is the maximum, delta == 0) and hsv2rgb (the six
// sectors) are written as selects between values that are all computed, every division with a
// denominator that cannot be 0, on GCC vectors as wide as the registers of the build the CPU
// runs: 8 float64 lanes with AVX-512, 4 with AVX2, 2 otherwise (hsv_lanes.inc, compiled once per
// build). Selecting among IEEE results computed as in the branchy form leaves every value
// unchanged; each lane keeps its order of operations and -ffp-contract=off forbids fused
// multiply-adds, so every build gives the same bytes (checked on all 2^24 colours in
// tests/test_pathology.py). Branch-free, the time no longer depends on the image: per 224 px RGB
// image 0.12 ms with AVX-512 and 0.23 ms with AVX2, against 0.27-1.0 ms for the branchy Numba loop
// it replaced (real and random colours); the 2-lane build takes 0.68 ms.
#include "hsv.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "kernel_common.hpp"

namespace mmc {
namespace {

// The kernel once per instruction set (hsv_lanes.inc): baseline, AVX2, AVX-512.
// Internal vectors only, never passed across a library boundary.
#pragma GCC diagnostic ignored "-Wpsabi"
#define MMC_HSV_LANES 2  // SSE2
namespace baseline {
#include "hsv_lanes.inc"
}  // namespace baseline
#undef MMC_HSV_LANES
#ifdef MMC_HAVE_AVX512
#pragma GCC push_options
#pragma GCC target("avx2")
#define MMC_HSV_LANES 4
namespace avx2 {
#include "hsv_lanes.inc"
}  // namespace avx2
#undef MMC_HSV_LANES
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi")
#define MMC_HSV_LANES 8
namespace avx512 {
#include "hsv_lanes.inc"
}  // namespace avx512
#undef MMC_HSV_LANES
#pragma GCC pop_options
#endif

// isa: "auto" (the best the CPU has), "avx512", "avx2" or "baseline" (tests compare them).
template <int CH>
void dispatch(const std::uint8_t* src, std::uint8_t* dst, std::ptrdiff_t pixels,
              std::ptrdiff_t c, double amount, const std::string& isa) {
#ifdef MMC_HAVE_AVX512
    const bool auto_isa = isa == "auto";
    if ((auto_isa || isa == "avx512") && cpu_has_avx512()) {
        return avx512::shift_all<CH>(src, dst, pixels, c, amount);
    }
    if ((auto_isa || isa == "avx2") && __builtin_cpu_supports("avx2")) {
        return avx2::shift_all<CH>(src, dst, pixels, c, amount);
    }
#endif
    baseline::shift_all<CH>(src, dst, pixels, c, amount);
}

// The instruction sets this build and CPU can run, best first.
std::vector<std::string> hsv_isas() {
    std::vector<std::string> out;
#ifdef MMC_HAVE_AVX512
    if (cpu_has_avx512()) out.push_back("avx512");
    if (__builtin_cpu_supports("avx2")) out.push_back("avx2");
#endif
    out.push_back("baseline");
    return out;
}

ImageOut hsv_shift(const ImageIn& image, int channel, double amount, const std::string& isa,
                   const py::object& out_arg) {
    const Shape s = image_shape(image, "hsv_shift");
    if (s.c != 1 && s.c != 3) {
        throw std::invalid_argument("hsv_shift: image must have 1 or 3 channels");
    }
    if (channel < 0 || channel > 2) {
        throw std::invalid_argument(
            "hsv_shift: channel must be 0 (hue), 1 (saturation) or 2 (value)");
    }
    if (isa != "auto") {
        const auto have = hsv_isas();
        if (std::find(have.begin(), have.end(), isa) == have.end()) {
            throw std::invalid_argument("hsv_shift: isa '" + isa +
                                        "' is not available here; see _hsv_isas()");
        }
    }
    ImageOut out = output_image(s, out_arg, "hsv_shift", image);
    const std::uint8_t* src = image.data();
    std::uint8_t* dst = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::ptrdiff_t pixels = s.h * s.w;
        if (channel == 0) dispatch<0>(src, dst, pixels, s.c, amount, isa);
        else if (channel == 1) dispatch<1>(src, dst, pixels, s.c, amount, isa);
        else dispatch<2>(src, dst, pixels, s.c, amount, isa);
    }
    return out;
}

}  // namespace

void register_hsv(py::module_& m) {
    m.def("hsv_shift", &hsv_shift, py::arg("image"), py::arg("channel"), py::arg("amount"),
          py::arg("isa") = "auto", py::arg("out") = py::none(),
          "Shift one HSV channel (0 = H, 1 = S, 2 = V, amount in [-1, 1]) of a uint8 (H, W, C) "
          "image, C = 1 or 3: scikit-image's float64 rgb2hsv / hsv2rgb bit for bit. isa: "
          "'auto' or one of _hsv_isas() (every one gives the same bytes). out: None (new array) "
          "or a writeable C-contiguous uint8 array of the image's shape, not sharing memory "
          "with it.");
    m.def("_hsv_isas", &hsv_isas,
          "Instruction sets hsv_shift can use on this CPU and build, best first.");
}

}  // namespace mmc
