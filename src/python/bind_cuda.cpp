// Bindings of the Triton cubin cache and the CUDA launcher (runtime/triton_build.h,
// runtime/cuda/{driver,kernel}.h) as ember._C.cuda, for tests and tools: compile jobs through the
// cache, Triton's launch ABI as a pure function (pack_args), whether a driver is there, and a
// Kernel that launches on raw device pointers and a raw stream (ints), so a test can run a
// compiled kernel on torch CUDA tensors. The runtime itself launches from C++. The autotuner's
// pieces (runtime/autotune.h, runtime/cuda/trials.h): the choice with a timer written in Python,
// the disk cache of choices, and tuning Kernels on the device.
// TritonBuildError becomes ember._C.cuda.TritonBuildError (a RuntimeError) carrying .detail;
// cache failures raise ember._C.codecache.CacheError (translated by the codecache binding).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
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
#include "runtime/cuda/trials.h"
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

codegen::TritonConfig config_of(const std::string& text) {
  std::optional<codegen::TritonConfig> config = runtime::parse_config(text);
  if (!config) throw nb::value_error(("not a Triton config: '" + text + "'").c_str());
  return *config;
}

std::vector<codegen::TritonConfig> configs_of(const std::vector<std::string>& texts) {
  std::vector<codegen::TritonConfig> configs;
  for (const std::string& text : texts) configs.push_back(config_of(text));
  return configs;
}

nb::dict result_dict(const runtime::TuneResult& r) {
  nb::dict d;
  d["best"] = r.best.str();
  d["best_ms"] = r.best_ms;
  d["found_by_coordinate_descent"] = r.found_by_coordinate_descent;
  d["timed"] = r.timed;
  d["dropped"] = r.dropped;
  return d;
}

void bind_autotune(nb::module_& m) {
  m.def(
      "tune_configs",
      [](const std::vector<std::string>& configs, nb::callable timer, bool coordinate_descent) {
        runtime::ConfigTimer time = [&](const codegen::TritonConfig& config, std::string* why) -> std::optional<double> {
          nb::object ms = timer(config.str());
          if (nb::isinstance<nb::str>(ms)) return *why = nb::cast<std::string>(ms), std::nullopt;
          return nb::cast<double>(ms);
        };
        return result_dict(runtime::tune_configs(configs_of(configs), time, coordinate_descent));
      },
      "configs"_a, "timer"_a, "coordinate_descent"_a = false,
      "The choice among configs (strings as TritonConfig.str() writes them); timer(config) returns "
      "milliseconds, or a string saying why the config cannot run.");
  m.def(
      "choose_matmul",
      [](nb::callable extern_timer, const std::vector<std::string>& configs, nb::callable timer, bool coordinate_descent) {
        auto timed = [](nb::object ms, std::string* why) -> std::optional<double> {
          if (nb::isinstance<nb::str>(ms)) return *why = nb::cast<std::string>(ms), std::nullopt;
          return nb::cast<double>(ms);
        };
        runtime::StepsTimer steps = [&](std::string* why) { return timed(extern_timer(), why); };
        runtime::ConfigTimer time = [&](const codegen::TritonConfig& config, std::string* why) {
          return timed(timer(config.str()), why);
        };
        runtime::MatmulChoice c = runtime::choose_matmul(steps, configs_of(configs), time, coordinate_descent);
        nb::dict d = result_dict(c.template_result);
        d["use_template"] = c.use_template;
        d["extern_ms"] = c.extern_ms;
        d["template_failed"] = c.template_failed;
        d["describe"] = runtime::describe(c);
        return d;
      },
      "extern_timer"_a, "configs"_a, "timer"_a, "coordinate_descent"_a = false,
      "The matmul choice: extern_timer() times the extern call + epilogue, timer(config) a template "
      "config; each returns milliseconds or a string saying why it cannot run.");
  m.def(
      "store_matmul_choice",
      [](const std::string& cache_dir, const std::string& key, bool use_template, const std::string& config,
         double extern_ms, double template_ms) {
        runtime::MatmulChoice c;
        c.use_template = use_template;
        c.extern_ms = extern_ms;
        c.template_result.best = config_of(config);
        c.template_result.best_ms = template_ms;
        runtime::store_matmul_choice(cache_dir, key, c);
      },
      "cache_dir"_a, "key"_a, "use_template"_a, "config"_a, "extern_ms"_a, "template_ms"_a);
  m.def(
      "load_matmul_choice",
      [](const std::string& cache_dir, const std::string& key) -> std::optional<std::pair<bool, std::string>> {
        std::optional<runtime::MatmulChoice> c = runtime::load_matmul_choice(cache_dir, key);
        if (!c) return std::nullopt;
        return std::make_pair(c->use_template, c->use_template ? c->template_result.best.str() : std::string());
      },
      "cache_dir"_a, "key"_a);
  m.def("best_config_path", &runtime::best_config_path, "cache_dir"_a, "key"_a);
  m.def(
      "store_best_config",
      [](const std::string& cache_dir, const std::string& key, const std::string& config, double ms) {
        runtime::TuneResult result;
        result.best = config_of(config);
        result.best_ms = ms;
        runtime::store_best_config(cache_dir, key, result);
      },
      "cache_dir"_a, "key"_a, "config"_a, "ms"_a);
  m.def(
      "load_best_config",
      [](const std::string& cache_dir, const std::string& key) -> std::optional<std::string> {
        std::optional<codegen::TritonConfig> config = runtime::load_best_config(cache_dir, key);
        return config ? std::optional<std::string>(config->str()) : std::nullopt;
      },
      "cache_dir"_a, "key"_a);
  m.def(
      "tune_on_device",
      [](const std::vector<std::string>& configs, const std::vector<const runtime::cuda::Kernel*>& kernels, int device,
         uint64_t stream, int64_t xnumel, const std::vector<nb::object>& values,
         const std::vector<std::pair<uint64_t, size_t>>& in_place, bool coordinate_descent) {
        if (configs.size() != kernels.size() || kernels.empty())
          throw nb::value_error("tune_on_device needs one kernel per config");
        std::vector<ArgValue> args = arg_values(kernels[0]->binary().param_types, values);
        runtime::cuda::KernelFor kernel_for = [&](const codegen::TritonConfig& config, std::string* why) {
          for (size_t i = 0; i < configs.size(); ++i)  // borrowed: the caller holds the Kernels
            if (config_of(configs[i]).str() == config.str())
              return std::shared_ptr<const runtime::cuda::Kernel>(std::shared_ptr<void>(), kernels[i]);
          *why = "not among the kernels given";
          return std::shared_ptr<const runtime::cuda::Kernel>();
        };
        std::vector<runtime::cuda::InPlaceRegion> regions;
        for (const auto& [pointer, bytes] : in_place) regions.push_back({pointer, bytes});
        return result_dict(runtime::cuda::tune_on_device(configs_of(configs), kernel_for, device,
                                                         reinterpret_cast<runtime::cuda::CUstream>(stream),
                                                         [xnumel](const codegen::TritonConfig& c) {
                                                           return std::make_pair(runtime::launch_grid(xnumel, c), 1u);
                                                         },
                                                         args.data(), regions, coordinate_descent));
      },
      "configs"_a, "kernels"_a, "device"_a, "stream"_a, "xnumel"_a, "args"_a, "in_place"_a, "coordinate_descent"_a = false,
      "Times kernels[i] (compiled with configs[i]) on raw pointers and a raw stream, as the runtime's first "
      "launch does; in_place: (pointer, bytes) regions saved and restored around the trials.");
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
  bind_autotune(m);
}

}  // namespace ember::python
