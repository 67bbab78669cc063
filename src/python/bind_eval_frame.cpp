#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ember::python {
void bind_eval_frame(nb::module_& m) {}
}  // namespace ember::python
