#include "lut.hpp"

#include "kernel_common.hpp"

namespace mmc {

void register_lut(py::module_& m) { (void)m; }

}  // namespace mmc
