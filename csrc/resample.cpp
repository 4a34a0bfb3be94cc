#include "resample.hpp"

#include "kernel_common.hpp"

namespace mmc {

void register_resample(py::module_& m) { (void)m; }

}  // namespace mmc
