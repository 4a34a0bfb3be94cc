// HSV shift kernel (see hsv.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_hsv(pybind11::module_& m);

}  // namespace mmc
