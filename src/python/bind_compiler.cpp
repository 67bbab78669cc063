#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ember::python {
void bind_compiler(nb::module_& m) {}
}  // namespace ember::python
