#pragma once

#include <pybind11/pybind11.h>

namespace mmc {
void register_pil(pybind11::module_& m);
}
