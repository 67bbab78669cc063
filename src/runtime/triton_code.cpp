// TritonCode: runs a program's Triton kernels and extern calls in order (triton_code.h).
#include "runtime/triton_code.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "codegen/cpp/include/ember/runtime.h"
#include "pybridge/errors.h"
#include "runtime/cuda/trials.h"

namespace ember::runtime {

namespace {

using loop_ir::Buffer;

bool symbolic_size(const codegen::TritonParam& p) {
  return p.kind == codegen::TritonParam::Kind::Size && !p.value.is_constant();
}

// The bits of a divisibility class above this are the tuning bucket; a kernel with more symbolic
// sizes leaves the rest unspecialized (never promised).
constexpr size_t kClassBits = 32;
constexpr uint64_t kClassMask = (uint64_t{1} << kClassBits) - 1;

int ceil_log2(int64_t v) {
  int bits = 0;
  while (bits < 62 && (int64_t{1} << bits) < v) ++bits;
  return bits;
}

// The bytes from element 0 of `b` to one past the last element its strides reach, over the symbols.
sym::Expr span_bytes_expr(const Buffer& b) {
  sym::Expr span = 1;
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    if (b.sizes[d].is_constant() && b.sizes[d].constant() == 0) return 0;
    span = span + (b.sizes[d] - 1) * b.strides[d];
  }
  return span * ir::dtype_itemsize(b.dtype);
}

// Sets a Python RuntimeError from a thread that may not hold the GIL (cubins run without it).
void set_error(const std::string& message) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyErr_SetString(PyExc_RuntimeError, message.c_str());
  PyGILState_Release(gil);
}

// A RuntimeWarning from a thread that may not hold the GIL. Returns false if it became an error
// (then set as the Python error).
bool warn(const std::string& line) {
  PyGILState_STATE gil = PyGILState_Ensure();
  const bool ok = PyErr_WarnEx(PyExc_RuntimeWarning, line.c_str(), 1) == 0;
  PyGILState_Release(gil);
  return ok;
}

// One line per tuned kernel on EMBER_LOGS=perf; without it, a warning when tuning took over a
// second, so that a slow first call is explained. Returns false if the warning became an error.
bool report_tuning(const std::string& line, double seconds, bool log_perf) {
  constexpr double kSlowTuningSeconds = 1.0;
  if (!log_perf && seconds <= kSlowTuningSeconds) return true;
  if (!log_perf) return warn(line);
  PyGILState_STATE gil = PyGILState_Ensure();
  PyRef logging = PyRef::steal(PyImport_ImportModule("logging"));
  PyRef logger = logging ? PyRef::steal(PyObject_CallMethod(logging.get(), "getLogger", "s", "ember.perf")) : PyRef();
  PyRef done = logger ? PyRef::steal(PyObject_CallMethod(logger.get(), "info", "s", line.c_str())) : PyRef();
  PyGILState_Release(gil);
  return static_cast<bool>(done);
}

// What a tuning choice is keyed on (the device, the compiled candidates' cubin keys) and chooses
// among (their configs). Throws std::runtime_error when the device cannot be described. A
// template: Runnable is TritonCode's private type.
struct TuneInputs {
  std::string device;
  std::vector<std::string> binary_keys;
  std::vector<codegen::TritonConfig> configs;
};
template <class Runnable>
TuneInputs tune_inputs(const Runnable& runnable, int device_index) {
  TuneInputs in;
  std::string error;
  std::optional<std::string> device = cuda::describe_device(device_index, &error);
  if (!device) throw std::runtime_error(error);
  in.device = *device;
  for (const auto& c : runnable.candidates) {
    in.binary_keys.push_back(c.kernel->binary().key);
    in.configs.push_back(c.config);
  }
  return in;
}

// The launchable kernel of one build result, or null with `*why` set: Triton's error (`error`), or
// a binary the launcher cannot run (scratch memory, clusters).
std::shared_ptr<const cuda::Kernel> kernel_of(TritonBinary binary, const std::string& error, std::string* why) {
  if (!error.empty()) {
    *why = "does not compile: " + triton_error_summary(error);
    return nullptr;
  }
  try {
    return std::make_shared<const cuda::Kernel>(std::move(binary));
  } catch (const std::invalid_argument& e) {
    *why = e.what();
    return nullptr;
  }
}

}  // namespace

TritonCompileJob specialized_job(const codegen::TritonKernel& kernel, const codegen::TritonConfig& config, bool aligned,
                                 uint64_t divisible) {
  TritonCompileJob job = compile_job({&kernel, &config});
  size_t k = 0;
  for (size_t p = 0; p < kernel.params.size(); ++p) {
    const codegen::TritonParam& param = kernel.params[p];
    bool promised = aligned && param.kind == codegen::TritonParam::Kind::Pointer;
    if (symbolic_size(param)) promised = k < kClassBits && ((divisible >> k++) & 1) != 0;
    if (promised) job.divisible_by_16.push_back(static_cast<int>(p));
  }
  return job;
}

namespace {

// The class of `kernel` when its symbolic Size parameters take the values `value_of` gives.
template <class ValueOf>
uint64_t class_at(const codegen::TritonKernel& kernel, const ValueOf& value_of) {
  uint64_t bits = 0;
  size_t k = 0;
  for (const codegen::TritonParam& p : kernel.params)
    if (symbolic_size(p)) {
      if (k < kClassBits && value_of(p) % 16 == 0) bits |= uint64_t{1} << k;
      ++k;
    }
  return bits;
}

}  // namespace

std::vector<uint64_t> ahead_classes(const codegen::TritonKernel& kernel) {
  std::vector<uint64_t> classes{class_at(kernel, [](const codegen::TritonParam& p) { return p.hint; })};
  std::set<std::string> names;
  for (const codegen::TritonParam& p : kernel.params)
    if (symbolic_size(p)) sym::free_symbols(p.value, names);
  if (names.empty() || kernel.configs.size() > 1) return classes;
  constexpr int kValuations = 5;  // a symbol 17 << v: an odd multiple of 2^v, v = 0 .. 4
  const bool each_combination = names.size() <= 3;
  size_t combinations = kValuations;
  if (each_combination)
    for (size_t i = 1; i < names.size(); ++i) combinations *= kValuations;
  for (size_t c = 0; c < combinations && classes.size() < kClassesAhead; ++c) {
    std::map<std::string, int64_t> values;
    size_t rest = c;
    for (const std::string& name : names) {
      values[name] = int64_t{17} << (each_combination ? rest % kValuations : c);
      rest /= kValuations;
    }
    const uint64_t bits = class_at(kernel, [&](const codegen::TritonParam& p) { return sym::evaluate(p.value, values); });
    if (std::find(classes.begin(), classes.end(), bits) == classes.end()) classes.push_back(bits);
  }
  return classes;
}

TritonCode::TritonCode(const loop_ir::Program& program, const memory::MemoryPlan& plan, codegen::TritonSource source,
                       std::vector<std::vector<Runnable>> runnables, TuneOptions tune)
    : source_(std::move(source)), steps_(program.steps), tune_(std::move(tune)) {
  const size_t kernels = source_.kernels.size();
  if (runnables.size() != kernels + source_.matmul_templates.size() || kernels != program.kernels.size())
    throw std::invalid_argument("Triton code: " + std::to_string(runnables.size()) + " runnables and " +
                                std::to_string(kernels) + " kernels for a program of " +
                                std::to_string(program.kernels.size()));
  for (const sym::SymbolInfo& s : program.symbols) symbol_names_.push_back(s.name);
  for (size_t k = 0; k < kernels; ++k) {
    if (source_.kernels[k].launched_by >= 0) {  // a grouped kernel's later member: its step launches nothing
      launches_.emplace_back();
      continue;
    }
    launches_.push_back(make_launch(program, plan, source_.kernels[k], nullptr, std::move(runnables[k])));
  }
  matmul_at_step_.assign(steps_.size(), -1);
  for (size_t t = 0; t < source_.matmul_templates.size(); ++t) {
    const codegen::MatmulTemplate& matmul = source_.matmul_templates[t];
    std::vector<Runnable>& classes = runnables[kernels + t];
    if (classes.empty()) throw std::invalid_argument("Triton code: matmul template " + matmul.kernel.name + " has no runnable");
    const Runnable& runnable = classes.front();
    if (runnable.interpreted) continue;  // the extern path only: templates are timed on a device
    if (runnable.candidates.empty()) {  // no fallback is silent: say why the extern path stays
      const std::string why = runnable.dropped.empty() ? "no configs" : runnable.dropped.front();
      if (!warn("ember: matmul template " + matmul.kernel.name + " compiled in none of its " +
                std::to_string(matmul.kernel.configs.size()) + " configs (" + why +
                "); the extern call and its epilogue kernel run instead")) {
        PyGILState_STATE gil = PyGILState_Ensure();
        const std::string error = pybridge::take_error_message();
        PyGILState_Release(gil);
        throw std::runtime_error(error);
      }
      continue;
    }
    for (size_t s = 0; s + 1 < steps_.size(); ++s) {
      if (steps_[s].kind != loop_ir::Step::Kind::Extern || steps_[s].index != matmul.extern_index) continue;
      if (steps_[s + 1].kind != loop_ir::Step::Kind::Kernel || steps_[s + 1].index != matmul.epilogue)
        throw std::invalid_argument("Triton code: matmul template " + matmul.kernel.name +
                                    " does not replace an extern step and the kernel step after it");
      auto slot = std::make_unique<MatmulSlot>();
      slot->matmul = &matmul;
      slot->launch = make_launch(program, plan, matmul.kernel, &matmul, std::move(classes));
      matmul_at_step_[s] = static_cast<int>(matmuls_.size());
      matmuls_.push_back(std::move(slot));
      break;
    }
  }
}

std::unique_ptr<TritonCode::Variant> TritonCode::new_variant(uint64_t key, Runnable runnable) {
  auto variant = std::make_unique<Variant>();
  variant->key = key;
  variant->runnable = std::move(runnable);
  if (variant->runnable.candidates.size() == 1 || variant->runnable.interpreted) {
    variant->choice.best = variant->runnable.candidates.front();
    variant->choice.tuned = true;
  }
  return variant;
}

TritonCode::Launch TritonCode::make_launch(const loop_ir::Program& program, const memory::MemoryPlan& plan,
                                           const codegen::TritonKernel& kernel, const codegen::MatmulTemplate* matmul,
                                           std::vector<Runnable> classes) {
  const bool symbolic = !program.symbols.empty();
  Launch launch;
  launch.kernel = &kernel;
  launch.matmul = matmul;
  // A kernel of a symbolic program may have constant sizes (it mentions no symbol): launched as static.
  if (kernel.xnumel.is_constant()) launch.xnumel = kernel.xnumel.constant();
  if (classes.empty()) throw std::invalid_argument("Triton code: kernel " + kernel.name + " has no runnable");
  for (Runnable& runnable : classes) {
    if (runnable.candidates.empty()) throw std::invalid_argument("Triton code: kernel " + kernel.name + " has no config to run");
    for (Candidate& c : runnable.candidates) {
      if (!c.kernel != static_cast<bool>(runnable.interpreted))
        throw std::invalid_argument("Triton code: kernel " + kernel.name +
                                    " needs exactly one of a cubin per config or an interpreted function");
      if (kernel.xnumel.is_constant()) std::tie(c.grid, c.grid_y) = grid_of(launch, c.config, launch.xnumel);
    }
    interpreted_ = interpreted_ || static_cast<bool>(runnable.interpreted);
    const uint64_t key = runnable.divisible;
    launch.variants.push_back(new_variant(key, std::move(runnable)));
  }
  for (const codegen::TritonParam& p : kernel.params) {
    Arg arg;
    if (p.kind == codegen::TritonParam::Kind::Size) {
      if (p.value.is_constant()) {
        arg.value = p.value.constant();
      } else {
        auto found = std::find(symbol_names_.begin(), symbol_names_.end(),
                               p.value.kind() == sym::ExprKind::Symbol ? p.value.symbol_name() : "");
        arg.kind = found == symbol_names_.end() ? Arg::Kind::Expr : Arg::Kind::Symbol;
        arg.value = found - symbol_names_.begin();
        arg.expr = p.value;
        launch.sized.push_back(launch.args.size());
      }
      if (p.name == "rnumel") launch.rnumel_arg = launch.args.size();
    } else {
      const Buffer& b = program.buffers.at(static_cast<size_t>(p.buffer));
      arg.buffer = b.id;
      if (p.use == codegen::TritonParam::Use::LoadStore) arg.in_place_bytes = span_bytes_expr(b);
      switch (b.kind) {
        case Buffer::Kind::Input:
        case Buffer::Kind::Output:
        case Buffer::Kind::Extern: arg.kind = Arg::Kind::BufferPointer; break;
        case Buffer::Kind::Temp:
          // With symbols the plan is per call: CompiledGraph puts the temporary's address in ctx->buffers.
          arg.kind = symbolic ? Arg::Kind::BufferPointer : Arg::Kind::ArenaPointer;
          if (!symbolic) arg.value = plan.offsets.at(static_cast<size_t>(b.id));
          break;
        case Buffer::Kind::View:
          throw std::invalid_argument("Triton code: kernel " + kernel.name + " takes view %" + b.name() +
                                      " as a pointer; views are addressed through their root buffer");
      }
    }
    launch.args.push_back(arg);
  }
  for (const std::unique_ptr<Variant>& v : launch.variants)
    for (const Candidate& c : v->runnable.candidates)
      if (c.kernel && c.kernel->binary().param_types.size() != launch.args.size())
        throw std::invalid_argument("Triton code: kernel " + kernel.name + " was compiled with " +
                                    std::to_string(c.kernel->binary().param_types.size()) +
                                    " launched parameters, its source has " + std::to_string(launch.args.size()));
  if (matmul == nullptr)  // a template's sites are its epilogue kernel's, listed with it
    for (const std::string& site : kernel.check_sites) check_sites_.push_back(site);
  launch.mutex = std::make_unique<std::mutex>();
  return launch;
}

std::pair<uint32_t, uint32_t> TritonCode::grid_of(const Launch& launch, const codegen::TritonConfig& config,
                                                  int64_t xnumel) const {
  if (launch.matmul == nullptr) return {launch_grid(xnumel, config), 1};
  const auto [x, y] = launch.matmul->grid(config);
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y)};
}

int TritonCode::run(ember_ctx* ctx, Env& env) const {
  for (size_t s = 0; s < steps_.size(); ++s) {
    const loop_ir::Step& step = steps_[s];
    if (step.kind == loop_ir::Step::Kind::Extern) {
      if (matmul_at_step_[s] >= 0) {
        MatmulSlot& slot = *matmuls_[static_cast<size_t>(matmul_at_step_[s])];
        bool use_template = false;
        if (!matmul_choice(slot, ctx, env, &use_template)) return 1;
        if (use_template) {
          if (!launch_cuda(slot.launch, ctx, env)) return 1;
          ++s;  // the template did the epilogue kernel's work too
          continue;
        }
      }
      if (ctx->call_extern(ctx, step.index) != 0) return 1;
      continue;
    }
    const Launch& launch = launches_[static_cast<size_t>(step.index)];
    if (launch.kernel == nullptr || (launch.sized.empty() && launch.xnumel == 0)) continue;
    if (!(interpreted_ ? launch_interpreted(launch, ctx, env) : launch_cuda(launch, ctx, env))) return 1;
  }
  return 0;
}

int64_t TritonCode::arg_values(const Launch& launch, const ember_ctx* ctx, cuda::ArgValue* values) const {
  const sym::SymbolLookup lookup = [&](const std::string& name) -> std::optional<int64_t> {
    for (size_t k = 0; k < symbol_names_.size(); ++k)
      if (symbol_names_[k] == name) return ctx->sym[k];
    return std::nullopt;
  };
  int64_t xnumel = launch.xnumel;
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const Arg& arg = launch.args[a];
    switch (arg.kind) {
      case Arg::Kind::BufferPointer:
        values[a].pointer = reinterpret_cast<uint64_t>(ctx->buffers[arg.buffer]);
        break;
      case Arg::Kind::ArenaPointer: values[a].pointer = reinterpret_cast<uint64_t>(ctx->arena + arg.value); break;
      case Arg::Kind::Value: values[a].integer = arg.value; break;
      case Arg::Kind::Symbol: values[a].integer = ctx->sym[arg.value]; break;
      case Arg::Kind::Expr: values[a].integer = sym::evaluate(arg.expr, lookup); break;
    }
  }
  // xnumel is the first Size parameter (emit_triton's order).
  if (!launch.sized.empty()) {
    const codegen::TritonKernel& kernel = *launch.kernel;
    for (size_t a = 0; a < kernel.params.size(); ++a)
      if (kernel.params[a].name == "xnumel") return values[a].integer;
  }
  return xnumel;
}

uint64_t TritonCode::variant_key(const Launch& launch, const cuda::ArgValue* values, int64_t xnumel) const {
  uint64_t key = 0;
  for (size_t k = 0; k < launch.sized.size() && k < kClassBits; ++k)
    if (values[launch.sized[k]].integer % 16 == 0) key |= uint64_t{1} << k;
  if (launch.kernel->configs.size() > 1) {
    // Tuning's size bucket: the next powers of two of xnumel and rnumel.
    const int64_t rnumel = launch.rnumel_arg == SIZE_MAX ? 1 : values[launch.rnumel_arg].integer;
    key |= static_cast<uint64_t>(ceil_log2(xnumel) | ceil_log2(rnumel) << 8) << kClassBits;
  }
  return key;
}

TritonCode::Variant* TritonCode::find_variant(const Launch& launch, uint64_t key, const Variant** first) const {
  std::lock_guard<std::mutex> lock(*launch.mutex);
  if (first != nullptr) *first = launch.variants.front().get();
  for (const std::unique_ptr<Variant>& v : launch.variants)
    if (v->key == key) return v.get();
  return nullptr;
}

std::vector<std::string> TritonCode::build_variants(const std::vector<MissingVariant>& missing) const {
  // Every missing variant's configs (the first variant's) with its class's promises, in one batch.
  std::vector<TritonCompileJob> jobs;
  for (const MissingVariant& m : missing)
    for (const Candidate& c : m.first->runnable.candidates)
      jobs.push_back(specialized_job(*m.launch->kernel, c.config, true, m.key));
  const TritonBuildOptions& options = missing.front().first->runnable.build_options;
  std::vector<std::string> errors(jobs.size());
  std::vector<TritonBinary> binaries(jobs.size());
  PyGILState_STATE gil = PyGILState_Ensure();  // Triton's compiler is Python
  try {
    binaries = build_triton_each(jobs, options, &errors);
  } catch (const std::exception& e) {
    errors.assign(jobs.size(), e.what());
  }
  PyGILState_Release(gil);
  std::vector<std::string> why(missing.size());
  size_t j = 0;
  for (size_t m = 0; m < missing.size(); ++m) {
    const Launch& launch = *missing[m].launch;
    Runnable runnable;
    runnable.divisible = missing[m].key & kClassMask;
    runnable.build_options = options;
    for (const Candidate& c : missing[m].first->runnable.candidates) {
      std::string reason;
      std::shared_ptr<const cuda::Kernel> kernel = kernel_of(std::move(binaries[j]), errors[j], &reason);
      ++j;
      if (kernel) runnable.candidates.push_back({c.config, std::move(kernel)});
      else runnable.dropped.push_back(c.config.str() + ": " + (why[m] = reason));
    }
    if (runnable.candidates.empty()) continue;
    why[m].clear();
    std::unique_ptr<Variant> made = new_variant(missing[m].key, std::move(runnable));
    std::lock_guard<std::mutex> lock(*launch.mutex);
    bool present = false;  // another thread may have built it meanwhile
    for (const std::unique_ptr<Variant>& v : launch.variants) present = present || v->key == made->key;
    if (!present) launch.variants.push_back(std::move(made));
  }
  return why;
}

TritonCode::Variant* TritonCode::variant_for(const Launch& launch, const ember_ctx* ctx, const cuda::ArgValue* values,
                                             int64_t xnumel) const {
  if (launch.sized.empty()) return launch.variants.front().get();
  const uint64_t key = variant_key(launch, values, xnumel);
  const Variant* first = nullptr;
  if (Variant* v = find_variant(launch, key, &first)) return v;
  // A new class (or bucket). The graph's other symbolic kernels share its symbols, so they usually
  // meet a new class at the same call: the variants this call needs for all of them are built in one
  // parallel batch, not one compile after another as each launch reaches its own.
  std::vector<MissingVariant> missing{{&launch, key, first}};
  if (launch.matmul == nullptr) {
    for (const Launch& other : launches_) {
      if (&other == &launch || other.kernel == nullptr || other.sized.empty()) continue;
      cuda::ArgValue other_values[cuda::kMaxParams];
      const int64_t other_xnumel = arg_values(other, ctx, other_values);
      const uint64_t other_key = variant_key(other, other_values, other_xnumel);
      const Variant* other_first = nullptr;
      if (other_xnumel != 0 && find_variant(other, other_key, &other_first) == nullptr)
        missing.push_back({&other, other_key, other_first});
    }
  }
  const std::vector<std::string> why = build_variants(missing);
  if (Variant* v = find_variant(launch, key)) return v;
  set_error("ember: compiling Triton kernel " + launch.kernel->name + " for sizes of divisibility class " +
            std::to_string(key) + " failed: " + why.front());
  return nullptr;
}

bool TritonCode::launch_cuda(const Launch& launch, ember_ctx* ctx, Env& env) const {
  // On the stack, not a member: calls of one graph may run at once on several threads (the GIL is
  // released). Every candidate's cubin has as many launched parameters as `args` (checked at
  // construction), and cuda::Kernel refuses a binary with more than kMaxParams.
  cuda::ArgValue values[cuda::kMaxParams];
  const int64_t xnumel = arg_values(launch, ctx, values);
  if (xnumel == 0) return true;
  bool aligned = true;
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const Arg::Kind kind = launch.args[a].kind;
    const bool pointer = kind == Arg::Kind::BufferPointer || kind == Arg::Kind::ArenaPointer;
    aligned = aligned && (!pointer || values[a].pointer % 16 == 0);
  }
  Variant* variant = variant_for(launch, ctx, values, xnumel);
  if (variant == nullptr) return false;
  // Candidates are timed on aligned pointers only (they are compiled with the promise), and never
  // while the stream captures a CUDA graph; such a call runs the first config (or the choice, once
  // made), a misaligned one compiled without the promise.
  Choice& choice = variant->choice;
  if (aligned && !choice.tuned.load(std::memory_order_acquire) &&
      !cuda::stream_capturing(static_cast<cuda::CUstream>(env.stream)) && !tune(launch, *variant, values, xnumel, env))
    return false;
  const Candidate& use = choice.tuned.load(std::memory_order_acquire) ? choice.best : variant->runnable.candidates.front();
  const cuda::Kernel* kernel = aligned ? use.kernel.get() : unaligned_kernel(launch, *variant, use.config);
  if (kernel == nullptr) return false;
  const std::pair<uint32_t, uint32_t> grid =
      launch.sized.empty() ? std::make_pair(use.grid, use.grid_y) : grid_of(launch, use.config, xnumel);
  std::string error;
  if (kernel->launch(env.device_index, static_cast<cuda::CUstream>(env.stream), grid.first, grid.second, 1, values, &error))
    return true;
  set_error("ember: launching Triton kernel failed: " + error);
  return false;
}

bool TritonCode::tune(const Launch& launch, Variant& variant, const cuda::ArgValue* values, int64_t xnumel,
                      const Env& env) const {
  Choice& choice = variant.choice;
  std::lock_guard<std::mutex> lock(choice.mutex);
  if (choice.tuned.load(std::memory_order_relaxed)) return true;
  const codegen::TritonKernel& kernel = *launch.kernel;
  const auto start = std::chrono::steady_clock::now();
  std::string error, how;
  try {
    TuneInputs in = tune_inputs(variant.runnable, env.device_index);
    // A symbolic kernel's choice is per size bucket too (the variant's key above the class bits).
    if (!launch.sized.empty()) in.binary_keys.push_back("bucket " + std::to_string(variant.key >> kClassBits));
    const std::string key = best_config_key(kernel, in.binary_keys, in.device, tune_.coordinate_descent);
    Candidate best;
    if (std::optional<codegen::TritonConfig> cached = load_best_config(tune_.cache_dir, key)) {
      best = candidate_for(launch, variant, *cached, xnumel, &error);
      how = "cached choice " + cached->str();
    }
    if (!best.kernel) {
      const std::vector<cuda::InPlaceRegion> in_place = in_place_regions(launch, values);
      std::map<std::string, Candidate> timed;
      cuda::KernelFor kernel_for = [&](const codegen::TritonConfig& config, std::string* why) {
        Candidate c = candidate_for(launch, variant, config, xnumel, why);
        return timed.emplace(config.str(), std::move(c)).first->second.kernel;
      };
      TuneResult result = cuda::tune_on_device(
          in.configs, kernel_for, env.device_index, static_cast<cuda::CUstream>(env.stream),
          [&](const codegen::TritonConfig& c) { return grid_of(launch, c, xnumel); }, values, in_place,
          tune_.coordinate_descent);
      best = timed.at(result.best.str());
      store_best_config(tune_.cache_dir, key, result);
      how = "timed " + std::to_string(result.timed) + " configs, best " + result.best.str() + " (" +
            std::to_string(result.best_ms * 1e3) + " us" + (result.found_by_coordinate_descent ? ", by coordinate descent" : "") + ")";
      for (const std::string& d : variant.runnable.dropped) how += "; dropped " + d;
      for (const std::string& d : result.dropped) how += "; dropped " + d;
    }
    choice.best = std::move(best);
  } catch (const std::exception& e) {
    set_error("ember: autotuning Triton kernel " + kernel.name + " failed: " + e.what());
    return false;
  }
  choice.tuned.store(true, std::memory_order_release);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  return report_tuning("ember: autotuning Triton kernel " + kernel.name + " took " + took + ": " + how + "; cached under " +
                           tune_.cache_dir + "/triton/best",
                       seconds, tune_.log_perf);
}

bool TritonCode::matmul_choice(MatmulSlot& slot, ember_ctx* ctx, Env& env, bool* use_template) const {
  *use_template = slot.state.load(std::memory_order_acquire) == kTemplate;
  if (slot.state.load(std::memory_order_acquire) != kUndecided) return true;
  const auto stream = static_cast<cuda::CUstream>(env.stream);
  cuda::ArgValue values[cuda::kMaxParams];
  const int64_t xnumel = arg_values(slot.launch, ctx, values);
  for (size_t a = 0; a < slot.launch.args.size(); ++a) {
    const Arg::Kind kind = slot.launch.args[a].kind;
    if ((kind == Arg::Kind::BufferPointer || kind == Arg::Kind::ArenaPointer) && values[a].pointer % 16 != 0)
      return true;  // templates are timed on aligned pointers: decided on a later call
  }
  if (cuda::stream_capturing(stream)) return true;
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (slot.state.load(std::memory_order_relaxed) != kUndecided) {
    *use_template = slot.state.load(std::memory_order_relaxed) == kTemplate;
    return true;
  }
  const codegen::MatmulTemplate& matmul = *slot.matmul;
  Variant& variant = *slot.launch.variants.front();
  const Launch& epilogue = launches_.at(static_cast<size_t>(matmul.epilogue));
  const auto start = std::chrono::steady_clock::now();
  const std::string what = "matmul choice for extern " + std::to_string(matmul.extern_index) + " + " + epilogue.kernel->name;
  std::string error, how;
  MatmulChoice choice;
  Candidate chosen;
  try {
    TuneInputs in = tune_inputs(variant.runnable, env.device_index);
    const std::string key = matmul_choice_key(*slot.launch.kernel, in.binary_keys, epilogue.kernel->source, in.device,
                                              tune_.coordinate_descent);
    std::optional<MatmulChoice> cached = load_matmul_choice(tune_.cache_dir, key);
    if (cached) {
      choice = *cached;
      how = "cached: ";
    } else {
      // (a): the extern call, then the epilogue kernel (tuned at its first launch, here), with the
      // epilogue's in-place buffers restored after each timing.
      cuda::ArgValue epilogue_values[cuda::kMaxParams];
      arg_values(epilogue, ctx, epilogue_values);
      cuda::Trials steps(env.device_index, stream);
      if (!steps.save(in_place_regions(epilogue, epilogue_values), &error))
        throw std::runtime_error("saving in-place buffers: " + error);
      StepsTimer extern_timer = [&](std::string* why) -> std::optional<double> {
        std::optional<double> ms = steps.time(
            [&](std::string* failed) {
              if (ctx->call_extern(ctx, matmul.extern_index) == 0 && launch_cuda(epilogue, ctx, env)) return true;
              PyGILState_STATE gil = PyGILState_Ensure();
              *failed = pybridge::take_error_message();
              PyGILState_Release(gil);
              return false;
            },
            why);
        if (!steps.restore(&error)) throw std::runtime_error("restoring in-place buffers: " + error);
        return ms;
      };
      // (b): the template's configs, as any kernel's.
      cuda::Trials trials(env.device_index, stream);
      if (!trials.save(in_place_regions(slot.launch, values), &error))
        throw std::runtime_error("saving in-place buffers: " + error);
      std::map<std::string, Candidate> timed;
      cuda::KernelFor kernel_for = [&](const codegen::TritonConfig& config, std::string* why) {
        Candidate c = candidate_for(slot.launch, variant, config, xnumel, why);
        return timed.emplace(config.str(), std::move(c)).first->second.kernel;
      };
      ConfigTimer template_timer = cuda::device_timer(
          trials, kernel_for, [&](const codegen::TritonConfig& c) { return grid_of(slot.launch, c, xnumel); }, values);
      choice = choose_matmul(extern_timer, in.configs, template_timer, tune_.coordinate_descent);
      store_matmul_choice(tune_.cache_dir, key, choice);
    }
    if (choice.use_template) chosen = candidate_for(slot.launch, variant, choice.template_result.best, xnumel, &error);
    if (choice.use_template && !chosen.kernel) throw std::runtime_error("the chosen template config: " + error);
  } catch (const std::exception& e) {
    set_error("ember: " + what + " failed: " + e.what());
    return false;
  }
  if (choice.use_template) {
    std::lock_guard<std::mutex> chosen_lock(variant.choice.mutex);
    variant.choice.best = chosen;
    variant.choice.tuned.store(true, std::memory_order_release);
  }
  slot.state.store(choice.use_template ? kTemplate : kExtern, std::memory_order_release);
  *use_template = choice.use_template;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  return report_tuning("ember: " + what + " took " + took + ": " + how + describe(choice) + "; cached under " +
                           tune_.cache_dir + "/triton/best",
                       seconds, tune_.log_perf);
}

std::vector<cuda::InPlaceRegion> TritonCode::in_place_regions(const Launch& launch, const cuda::ArgValue* values) const {
  const sym::SymbolLookup at_values = [&](const std::string& name) -> std::optional<int64_t> {
    for (size_t a = 0; a < launch.args.size(); ++a)
      if (launch.args[a].kind == Arg::Kind::Symbol && symbol_names_[static_cast<size_t>(launch.args[a].value)] == name)
        return values[a].integer;
    return std::nullopt;
  };
  std::vector<cuda::InPlaceRegion> regions;
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const int64_t bytes = sym::evaluate(launch.args[a].in_place_bytes, at_values);
    if (bytes > 0) regions.push_back({values[a].pointer, static_cast<size_t>(bytes)});
  }
  return regions;
}

TritonCode::Candidate TritonCode::candidate_for(const Launch& launch, const Variant& variant,
                                                const codegen::TritonConfig& config, int64_t xnumel,
                                                std::string* why) const {
  for (const Candidate& c : variant.runnable.candidates)
    if (c.config.str() == config.str()) return c;
  Candidate made{config, nullptr};
  std::tie(made.grid, made.grid_y) = grid_of(launch, config, xnumel);
  PyGILState_STATE gil = PyGILState_Ensure();  // Triton's compiler is Python
  try {
    std::vector<std::string> errors;
    std::vector<TritonBinary> built =
        build_triton_each({specialized_job(*launch.kernel, config, true, variant.key)},
                          variant.runnable.build_options, &errors);
    made.kernel = kernel_of(std::move(built[0]), errors[0], why);
  } catch (const std::exception& e) {
    *why = e.what();
  }
  PyGILState_Release(gil);
  return made;
}

const cuda::Kernel* TritonCode::unaligned_kernel(const Launch& launch, Variant& variant,
                                                 const codegen::TritonConfig& config) const {
  Choice& choice = variant.choice;
  std::lock_guard<std::mutex> lock(choice.mutex);
  if (choice.unaligned && choice.unaligned_config == config.str()) return choice.unaligned.get();
  // Runs without the GIL (needs_gil() is false for cubins); Triton's compiler needs it.
  PyGILState_STATE gil = PyGILState_Ensure();
  const codegen::TritonKernel& kernel = *launch.kernel;
  try {
    std::vector<TritonBinary> built =
        build_triton({specialized_job(kernel, config, false, variant.key)}, variant.runnable.build_options);
    choice.unaligned = std::make_shared<const cuda::Kernel>(std::move(built.at(0)));
    choice.unaligned_config = config.str();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "ember: compiling Triton kernel %s for unaligned inputs failed: %s",
                 kernel.name.c_str(), e.what());
    choice.unaligned = nullptr;
  }
  PyGILState_Release(gil);
  return choice.unaligned.get();
}

bool TritonCode::launch_interpreted(const Launch& launch, const ember_ctx* ctx, Env& env) const {
  cuda::ArgValue values[cuda::kMaxParams];
  const int64_t xnumel = arg_values(launch, ctx, values);  // pointers unused: the interpreter takes tensors
  if (xnumel == 0) return true;
  PyRef args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(launch.args.size())));
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const Arg& arg = launch.args[a];
    PyObject* item = nullptr;
    if (arg.kind == Arg::Kind::Value || arg.kind == Arg::Kind::Symbol || arg.kind == Arg::Kind::Expr) {
      item = PyLong_FromLongLong(values[a].integer);
    } else {
      item = env.tensor(arg.buffer);
      Py_XINCREF(item);
    }
    if (item == nullptr) return false;
    PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(a), item);
  }
  PyRef kwargs = PyRef::steal(PyDict_New());
  const codegen::TritonConfig& config = launch.variants.front()->runnable.candidates.front().config;
  for (const auto& [name, value] : config.blocks) {
    PyRef v = PyRef::steal(PyLong_FromLongLong(value));
    PyDict_SetItemString(kwargs.get(), name.c_str(), v.get());
  }
  PyRef grid_tuple = PyRef::steal(Py_BuildValue("(L)", static_cast<long long>(launch_grid(xnumel, config))));
  PyRef bound = PyRef::steal(PyObject_GetItem(launch.variants.front()->runnable.interpreted.get(), grid_tuple.get()));
  if (!bound) return false;
  PyRef done = PyRef::steal(PyObject_Call(bound.get(), args.get(), kwargs.get()));
  return static_cast<bool>(done);
}

std::vector<std::vector<TritonCode::Runnable>> build_runnables(const codegen::TritonSource& source,
                                                               const ir::Device& device,
                                                               const TritonBuildOptions& options, bool* all_cached) {
  // Kernels, then matmul templates (compiled in the same batch; one that does not compile keeps
  // the extern path).
  std::vector<const codegen::TritonKernel*> kernels;
  for (const codegen::TritonKernel& k : source.kernels) kernels.push_back(&k);
  for (const codegen::MatmulTemplate& t : source.matmul_templates) kernels.push_back(&t.kernel);
  std::vector<std::vector<TritonCode::Runnable>> runnables(kernels.size());
  *all_cached = true;
  if (device.type == "cuda") {
    struct JobOf {
      size_t kernel, klass;
      const codegen::TritonConfig* config;
    };
    std::vector<TritonCompileJob> jobs;
    std::vector<JobOf> job_of;
    for (size_t k = 0; k < kernels.size(); ++k) {
      if (kernels[k]->launched_by >= 0) continue;  // run by a grouped kernel: nothing to build
      for (uint64_t divisible : ahead_classes(*kernels[k])) {
        TritonCode::Runnable& runnable = runnables[k].emplace_back();
        runnable.divisible = divisible;
        runnable.build_options = options;
        for (const codegen::TritonConfig& config : kernels[k]->configs) {
          jobs.push_back(specialized_job(*kernels[k], config, true, divisible));
          job_of.push_back({k, runnables[k].size() - 1, &config});
        }
      }
    }
    std::vector<std::string> errors;
    std::vector<TritonBinary> binaries = build_triton_each(jobs, options, &errors);
    std::vector<std::string> first_error(kernels.size());
    for (size_t j = 0; j < binaries.size(); ++j) {
      const JobOf& of = job_of[j];
      TritonCode::Runnable& runnable = runnables[of.kernel][of.klass];
      std::string why;
      const bool hit = binaries[j].cache_hit;
      if (std::shared_ptr<const cuda::Kernel> kernel = kernel_of(std::move(binaries[j]), errors[j], &why)) {
        *all_cached = *all_cached && hit;
        runnable.candidates.push_back({*of.config, std::move(kernel)});
        continue;
      }
      runnable.dropped.push_back(of.config->str() + ": " + why);
      if (of.klass == 0 && first_error[of.kernel].empty()) first_error[of.kernel] = errors[j].empty() ? why : errors[j];
    }
    for (size_t k = 0; k < kernels.size(); ++k) {
      // A class ahead none of whose configs compiled is left to its first launch, which says why.
      std::vector<TritonCode::Runnable>& classes = runnables[k];
      if (classes.empty()) continue;  // launched_by another kernel
      classes.erase(std::remove_if(classes.begin() + 1, classes.end(),
                                   [](const TritonCode::Runnable& r) { return r.candidates.empty(); }),
                    classes.end());
      if (k < source.kernels.size() && classes.front().candidates.empty())  // a template keeps the extern path
        throw TritonBuildError("Triton could not compile kernel " + source.kernels[k].name + " in any of its " +
                                   std::to_string(source.kernels[k].configs.size()) + " configs",
                               first_error[k]);
    }
    return runnables;
  }
  PyRef module = PyRef::steal(PyImport_ImportModule("ember._triton.interpret"));
  PyRef load = module ? PyRef::steal(PyObject_GetAttrString(module.get(), "load")) : PyRef();
  if (!load) throw std::runtime_error("Triton's interpreter is not available: " + pybridge::take_error_message());
  for (size_t k = 0; k < source.kernels.size(); ++k) {
    const codegen::TritonKernel& kernel = source.kernels[k];
    if (kernel.launched_by >= 0) continue;  // run by a grouped kernel
    PyRef source_text = PyRef::steal(PyUnicode_FromStringAndSize(kernel.source.data(), static_cast<Py_ssize_t>(kernel.source.size())));
    PyRef name = PyRef::steal(PyUnicode_FromStringAndSize(kernel.name.data(), static_cast<Py_ssize_t>(kernel.name.size())));
    PyRef fn = source_text && name ? PyRef::steal(PyObject_CallFunctionObjArgs(load.get(), source_text.get(), name.get(), nullptr))
                                   : PyRef();
    if (!fn) throw std::runtime_error("loading Triton kernel " + kernel.name + " into the interpreter: " + pybridge::take_error_message());
    TritonCode::Runnable& runnable = runnables[k].emplace_back();
    runnable.candidates.push_back({kernel.configs.front(), nullptr});
    runnable.interpreted = std::move(fn);
  }
  for (size_t t = source.kernels.size(); t < kernels.size(); ++t) runnables[t].emplace_back();  // templates: none
  *all_cached = false;
  return runnables;
}

}  // namespace ember::runtime
