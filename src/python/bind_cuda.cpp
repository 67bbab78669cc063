// Bindings of the Triton cubin cache and the CUDA launcher (runtime/triton_build.h,
// runtime/cuda/{driver,kernel}.h) as ember._C.cuda, for tests and tools: compile jobs through the
// cache, Triton's launch ABI as a pure function (pack_args), whether a driver is there, and a
// Kernel that launches on raw device pointers and a raw stream (ints), so a test can run a
// compiled kernel on torch CUDA tensors. The runtime itself launches from C++.
// TritonBuildError becomes ember._C.cuda.TritonBuildError (a RuntimeError) carrying .detail;
// cache failures raise ember._C.codecache.CacheError (translated by the codecache binding).
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "loop_ir/loop_ir.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/kernel.h"
#include "runtime/cuda_graph_runner.h"
#include "runtime/triton_build.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {

namespace {

using runtime::TritonBinary;
using runtime::TritonCompileJob;
using runtime::cuda::ArgValue;
using runtime::cuda::ParamLayout;

PyObject* build_error_type = nullptr;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const runtime::TritonBuildError& e) {
    nb::object error = nb::steal(PyObject_CallFunction(build_error_type, "s", e.what()));
    if (!error.is_valid()) return;  // the call set a Python error already
    error.attr("detail") = nb::str(e.detail.c_str(), e.detail.size());
    PyErr_SetObject(build_error_type, error.ptr());
  }
}

// Python ints (pointers, integers) and floats as the launcher's values, read by each parameter's
// layout.
std::vector<ArgValue> arg_values(const std::vector<std::string>& types, const std::vector<nb::object>& values) {
  if (types.size() != values.size()) {
    throw nb::value_error(("expected " + std::to_string(types.size()) + " arguments, got " +
                           std::to_string(values.size()))
                              .c_str());
  }
  std::vector<ArgValue> args(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    switch (runtime::cuda::param_layout(types[i]).encoding) {
      case ParamLayout::Encoding::Pointer:
        args[i].pointer = nb::cast<uint64_t>(values[i]);
        break;
      case ParamLayout::Encoding::Signed:
      case ParamLayout::Encoding::Unsigned:
        args[i].integer = nb::cast<int64_t>(values[i]);
        break;
      case ParamLayout::Encoding::Float16:
      case ParamLayout::Encoding::BFloat16:
      case ParamLayout::Encoding::Float32:
      case ParamLayout::Encoding::Float64:
        args[i].floating = nb::cast<double>(values[i]);
        break;
    }
  }
  return args;
}

std::vector<ParamLayout> layouts_of(const std::vector<std::string>& types) {
  std::vector<ParamLayout> layouts;
  for (const std::string& type : types) layouts.push_back(runtime::cuda::param_layout(type));
  return layouts;
}

}  // namespace

void bind_cuda(nb::module_& m) {
  build_error_type = PyErr_NewException("ember._C.cuda.TritonBuildError", PyExc_RuntimeError, nullptr);
  m.attr("TritonBuildError") = nb::handle(build_error_type);
  nb::register_exception_translator(translate);

  nb::class_<TritonCompileJob>(m, "CompileJob")
      .def(
          "__init__",
          [](TritonCompileJob* self, std::string source, std::string name,
             std::vector<std::pair<std::string, std::string>> signature,
             std::vector<std::pair<std::string, int64_t>> constexprs, int num_warps, int num_stages, bool debug,
             std::vector<int> divisible_by_16) {
            new (self) TritonCompileJob{std::move(source), std::move(name),  std::move(signature),
                                        std::move(constexprs), std::move(divisible_by_16), num_warps,
                                        num_stages, debug};
          },
          "source"_a, "name"_a, "signature"_a, "constexprs"_a = std::vector<std::pair<std::string, int64_t>>{},
          "num_warps"_a = 4, "num_stages"_a = 1, "debug"_a = false, "divisible_by_16"_a = std::vector<int>{})
      .def_ro("source", &TritonCompileJob::source)
      .def_ro("name", &TritonCompileJob::name);

  nb::class_<TritonBinary>(m, "Binary")
      .def(nb::init<>())
      .def_rw("entry", &TritonBinary::entry)
      .def_prop_rw(
          "cubin", [](const TritonBinary& b) { return nb::bytes(b.cubin.data(), b.cubin.size()); },
          [](TritonBinary& b, nb::bytes bytes) { b.cubin.assign(bytes.c_str(), bytes.size()); })
      .def_rw("num_warps", &TritonBinary::num_warps)
      .def_rw("num_ctas", &TritonBinary::num_ctas)
      .def_rw("shared_bytes", &TritonBinary::shared_bytes)
      .def_rw("global_scratch_bytes", &TritonBinary::global_scratch_bytes)
      .def_rw("global_scratch_align", &TritonBinary::global_scratch_align)
      .def_rw("profile_scratch_bytes", &TritonBinary::profile_scratch_bytes)
      .def_rw("profile_scratch_align", &TritonBinary::profile_scratch_align)
      .def_rw("param_types", &TritonBinary::param_types)
      .def_rw("cache_hit", &TritonBinary::cache_hit)
      .def_rw("key", &TritonBinary::key)
      .def_rw("dir", &TritonBinary::dir);

  m.def(
      "build",
      [](const std::vector<TritonCompileJob>& jobs, std::string cache_dir, int capability, int workers) {
        runtime::TritonBuildOptions options;
        options.cache_dir = std::move(cache_dir);
        options.target.capability = capability;
        options.workers = workers;
        return runtime::build_triton(jobs, options);
      },
      "jobs"_a, "cache_dir"_a, "capability"_a = 90, "workers"_a = 0,
      "Binaries for the jobs, in order, through the cubin cache under cache_dir (needs triton, no GPU).");

  m.def(
      "pack_args",
      [](const std::vector<std::string>& types, const std::vector<nb::object>& values) {
        std::vector<ArgValue> args = arg_values(types, values);
        std::vector<uint64_t> slots(types.size() + runtime::cuda::kScratchSlots);
        runtime::cuda::pack_args(layouts_of(types), args.data(), slots.data());
        return slots;
      },
      "param_types"_a, "values"_a, "The 8-byte slots a launch passes: one per parameter, then the two scratch pointers.");
  m.def(
      "param_bytes", [](const std::string& type) { return int(runtime::cuda::param_layout(type).bytes); }, "type"_a,
      "How many bytes of its slot the kernel reads for a parameter of this Triton type.");

  m.def("driver_available", [] {
    std::string why_not;
    bool available = runtime::cuda::Driver::get(&why_not) != nullptr;
    return std::make_pair(available, why_not);
  });

  m.def(
      "why_no_cuda_graph", [](const std::string& loop_ir_text) { return runtime::why_no_cuda_graph(loop_ir::parse(loop_ir_text)); },
      "loop_ir"_a, "Why mode='reduce-overhead' would not replay this program as a CUDA graph ('' when it would).");

  nb::class_<runtime::cuda::Kernel>(m, "Kernel")
      .def(nb::init<TritonBinary>(), "binary"_a)
      .def_prop_ro("binary", [](const runtime::cuda::Kernel& k) { return k.binary(); })
      .def(
          "launch",
          [](const runtime::cuda::Kernel& kernel, int device, uint64_t stream,
             std::tuple<uint32_t, uint32_t, uint32_t> grid, const std::vector<nb::object>& values) {
            std::vector<ArgValue> args = arg_values(kernel.binary().param_types, values);
            std::string error;
            if (!kernel.launch(device, reinterpret_cast<runtime::cuda::CUstream>(stream), std::get<0>(grid),
                               std::get<1>(grid), std::get<2>(grid), args.data(), &error)) {
              throw std::runtime_error(error);
            }
          },
          "device"_a, "stream"_a, "grid"_a, "args"_a,
          "Launches on raw device pointers (ints) and a raw stream (torch.cuda.current_stream().cuda_stream).");
}

}  // namespace ember::python
