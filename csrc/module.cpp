// medmnistc_fast._native: registration only; the kernels live in one .cpp file per family.
#include <pybind11/pybind11.h>

#include "blur.hpp"
#include "hsv.hpp"
#include "lut.hpp"
#include "noise.hpp"
#include "pil.hpp"
#include "resample.hpp"
#include "seed.hpp"

PYBIND11_MODULE(_native, m) {
    m.doc() = "C++ kernels of medmnistc_fast (private; call the public functions instead).";
    mmc::register_blur(m);
    mmc::register_hsv(m);
    mmc::register_lut(m);
    mmc::register_noise(m);
    mmc::register_pil(m);
    mmc::register_resample(m);
    mmc::register_seed(m);
}
