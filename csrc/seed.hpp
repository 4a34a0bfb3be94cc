// Seed-sequence hashing (see seed.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_seed(pybind11::module_& m);

}  // namespace mmc
