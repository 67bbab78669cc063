#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ember::python {
void bind_ir(nb::module_& m) {}
}  // namespace ember::python
