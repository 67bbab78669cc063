// TritonCode: runs a program's Triton kernels and extern calls in order (triton_code.h).
#include "runtime/triton_code.h"

#include <stdexcept>

#include "codegen/cpp/include/ember/runtime.h"
#include "pybridge/errors.h"

namespace ember::runtime {

namespace {

using loop_ir::Buffer;

int64_t block_of(const codegen::TritonConfig& config, const char* name) {
  for (const auto& [block, value] : config.blocks)
    if (block == name) return value;
  throw std::invalid_argument(std::string("Triton config '") + config.str() + "' has no " + name);
}

}  // namespace

TritonCode::TritonCode(const loop_ir::Program& program, const memory::MemoryPlan& plan, codegen::TritonSource source,
                       std::vector<Runnable> runnables)
    : source_(std::move(source)), steps_(program.steps) {
  if (runnables.size() != source_.kernels.size() || source_.kernels.size() != program.kernels.size())
    throw std::invalid_argument("Triton code: " + std::to_string(runnables.size()) + " runnables and " +
                                std::to_string(source_.kernels.size()) + " kernels for a program of " +
                                std::to_string(program.kernels.size()));
  for (size_t k = 0; k < runnables.size(); ++k) {
    const codegen::TritonKernel& kernel = source_.kernels[k];
    Launch launch;
    launch.runnable = std::move(runnables[k]);
    if (!launch.runnable.cuda == !launch.runnable.interpreted)
      throw std::invalid_argument("Triton code: kernel " + kernel.name + " needs exactly one of a cubin or an interpreted function");
    interpreted_ = interpreted_ || static_cast<bool>(launch.runnable.interpreted);
    launch.xnumel = kernel.xnumel.constant();
    launch.xblock = block_of(launch.runnable.config, "XBLOCK");
    for (const codegen::TritonParam& p : kernel.params) {
      Arg arg;
      if (p.kind == codegen::TritonParam::Kind::Size) {
        arg.value = p.value.constant();
      } else {
        const Buffer& b = program.buffers.at(static_cast<size_t>(p.buffer));
        arg.buffer = b.id;
        switch (b.kind) {
          case Buffer::Kind::Input:
          case Buffer::Kind::Output:
          case Buffer::Kind::Extern: arg.kind = Arg::Kind::BufferPointer; break;
          case Buffer::Kind::Temp:
            arg.kind = Arg::Kind::ArenaPointer;
            arg.value = plan.offsets.at(static_cast<size_t>(b.id));
            break;
          case Buffer::Kind::View:
            throw std::invalid_argument("Triton code: kernel " + kernel.name + " takes view %" + b.name() +
                                        " as a pointer; views are addressed through their root buffer");
        }
      }
      launch.args.push_back(arg);
    }
    if (launch.runnable.cuda && launch.runnable.cuda->binary().param_types.size() != launch.args.size())
      throw std::invalid_argument("Triton code: kernel " + kernel.name + " was compiled with " +
                                  std::to_string(launch.runnable.cuda->binary().param_types.size()) +
                                  " launched parameters, its source has " + std::to_string(launch.args.size()));
    for (const std::string& site : kernel.check_sites) check_sites_.push_back(site);
    launches_.push_back(std::move(launch));
  }
}

int TritonCode::run(ember_ctx* ctx, Env& env) const {
  for (const loop_ir::Step& step : steps_) {
    if (step.kind == loop_ir::Step::Kind::Extern) {
      if (ctx->call_extern(ctx, step.index) != 0) return 1;
      continue;
    }
    const Launch& launch = launches_[static_cast<size_t>(step.index)];
    if (launch.xnumel == 0) continue;
    if (!(launch.runnable.cuda ? launch_cuda(launch, ctx, env) : launch_interpreted(launch, env))) return 1;
  }
  return 0;
}

bool TritonCode::launch_cuda(const Launch& launch, ember_ctx* ctx, Env& env) const {
  std::vector<cuda::ArgValue> values(launch.args.size());
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const Arg& arg = launch.args[a];
    switch (arg.kind) {
      case Arg::Kind::BufferPointer:
        values[a].pointer = reinterpret_cast<uint64_t>(ctx->buffers[arg.buffer]);
        break;
      case Arg::Kind::ArenaPointer: values[a].pointer = reinterpret_cast<uint64_t>(ctx->arena + arg.value); break;
      case Arg::Kind::Value: values[a].integer = arg.value; break;
    }
  }
  const cuda::Kernel* kernel = launch.runnable.cuda.get();
  for (size_t a = 0; a < launch.args.size(); ++a)
    if (launch.args[a].kind != Arg::Kind::Value && values[a].pointer % 16 != 0) {
      kernel = unaligned_kernel(launch);
      if (kernel == nullptr) return false;
      break;
    }
  const int64_t grid = (launch.xnumel + launch.xblock - 1) / launch.xblock;
  std::string error;
  if (kernel->launch(env.device_index, static_cast<cuda::CUstream>(env.stream), static_cast<uint32_t>(grid), 1, 1,
                     values.data(), &error))
    return true;
  // Runs without the GIL (needs_gil() is false for cubins): take it to report.
  PyGILState_STATE gil = PyGILState_Ensure();
  PyErr_Format(PyExc_RuntimeError, "ember: launching Triton kernel failed: %s", error.c_str());
  PyGILState_Release(gil);
  return false;
}

const cuda::Kernel* TritonCode::unaligned_kernel(const Launch& launch) const {
  std::lock_guard<std::mutex> lock(unaligned_mutex_);
  if (launch.unaligned) return launch.unaligned.get();
  // Runs without the GIL (needs_gil() is false for cubins); Triton's compiler needs it.
  PyGILState_STATE gil = PyGILState_Ensure();
  try {
    std::vector<TritonBinary> built = build_triton({launch.runnable.unaligned_job}, launch.runnable.build_options);
    launch.unaligned = std::make_shared<const cuda::Kernel>(std::move(built.at(0)));
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "ember: compiling Triton kernel %s for unaligned inputs failed: %s",
                 launch.runnable.unaligned_job.name.c_str(), e.what());
  }
  PyGILState_Release(gil);
  return launch.unaligned.get();
}

bool TritonCode::launch_interpreted(const Launch& launch, Env& env) const {
  PyRef args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(launch.args.size())));
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const Arg& arg = launch.args[a];
    PyObject* item = nullptr;
    if (arg.kind == Arg::Kind::Value) {
      item = PyLong_FromLongLong(arg.value);
    } else {
      item = env.tensor(arg.buffer);
      Py_XINCREF(item);
    }
    if (item == nullptr) return false;
    PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(a), item);
  }
  PyRef kwargs = PyRef::steal(PyDict_New());
  for (const auto& [name, value] : launch.runnable.config.blocks) {
    PyRef v = PyRef::steal(PyLong_FromLongLong(value));
    PyDict_SetItemString(kwargs.get(), name.c_str(), v.get());
  }
  const int64_t grid = (launch.xnumel + launch.xblock - 1) / launch.xblock;
  PyRef grid_tuple = PyRef::steal(Py_BuildValue("(L)", static_cast<long long>(grid)));
  PyRef bound = PyRef::steal(PyObject_GetItem(launch.runnable.interpreted.get(), grid_tuple.get()));
  if (!bound) return false;
  PyRef done = PyRef::steal(PyObject_Call(bound.get(), args.get(), kwargs.get()));
  return static_cast<bool>(done);
}

std::vector<TritonCode::Runnable> build_runnables(const codegen::TritonSource& source, const ir::Device& device,
                                                  const TritonBuildOptions& options, bool* all_cached) {
  std::vector<TritonCode::Runnable> runnables(source.kernels.size());
  *all_cached = true;
  if (device.type == "cuda") {
    std::vector<TritonCompileJob> jobs;
    for (size_t k = 0; k < source.kernels.size(); ++k) {
      const codegen::TritonKernel& kernel = source.kernels[k];
      TritonCompileJob job = compile_job({&kernel, &kernel.configs.front()});
      runnables[k].unaligned_job = job;
      runnables[k].build_options = options;
      for (size_t p = 0; p < kernel.params.size(); ++p)
        if (kernel.params[p].kind == codegen::TritonParam::Kind::Pointer) job.divisible_by_16.push_back(static_cast<int>(p));
      jobs.push_back(std::move(job));
    }
    std::vector<TritonBinary> binaries = build_triton(jobs, options);
    for (size_t k = 0; k < binaries.size(); ++k) {
      *all_cached = *all_cached && binaries[k].cache_hit;
      runnables[k].config = source.kernels[k].configs.front();
      runnables[k].cuda = std::make_shared<const cuda::Kernel>(std::move(binaries[k]));
    }
    return runnables;
  }
  PyRef module = PyRef::steal(PyImport_ImportModule("ember._triton.interpret"));
  PyRef load = module ? PyRef::steal(PyObject_GetAttrString(module.get(), "load")) : PyRef();
  if (!load) throw std::runtime_error("Triton's interpreter is not available: " + pybridge::take_error_message());
  for (size_t k = 0; k < source.kernels.size(); ++k) {
    const codegen::TritonKernel& kernel = source.kernels[k];
    PyRef source_text = PyRef::steal(PyUnicode_FromStringAndSize(kernel.source.data(), static_cast<Py_ssize_t>(kernel.source.size())));
    PyRef name = PyRef::steal(PyUnicode_FromStringAndSize(kernel.name.data(), static_cast<Py_ssize_t>(kernel.name.size())));
    PyRef fn = source_text && name ? PyRef::steal(PyObject_CallFunctionObjArgs(load.get(), source_text.get(), name.get(), nullptr))
                                   : PyRef();
    if (!fn) throw std::runtime_error("loading Triton kernel " + kernel.name + " into the interpreter: " + pybridge::take_error_message());
    runnables[k].config = kernel.configs.front();
    runnables[k].interpreted = std::move(fn);
  }
  *all_cached = false;
  return runnables;
}

}  // namespace ember::runtime
