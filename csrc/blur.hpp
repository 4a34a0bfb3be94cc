// Blur kernels: motion_blur, zoom_blur, filter2d (defocus), gaussian_blur.
#pragma once

#include <pybind11/pybind11.h>

namespace mmc {

void register_blur(pybind11::module_& m);

}  // namespace mmc
