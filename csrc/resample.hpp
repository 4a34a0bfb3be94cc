// resample kernels (see resample.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_resample(pybind11::module_& m);

}  // namespace mmc
