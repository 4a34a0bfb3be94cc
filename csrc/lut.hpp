// lut kernels (see lut.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_lut(pybind11::module_& m);

}  // namespace mmc
