// Noise kernels: alias-method sampling of exact per-element output laws (see noise.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_noise(pybind11::module_& m);

}  // namespace mmc
