// The cubin cache (triton_build.h). Keys, files and locks are C++ (cache_files.h, as the C++ code
// cache's); Triton's compiler is Python, reached through python/ember/_triton/compile.py with the
// GIL held: fingerprint() for the toolchain's part of the key, compile_kernels() for the misses.
// meta.json is written and read through Python's json module, which is already at hand.
#include "runtime/triton_build.h"

#include <Python.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>

#include "pybridge/errors.h"
#include "pybridge/pyref.h"
#include "runtime/cache_files.h"
#include "support/sha256.h"

namespace ember::runtime {

namespace {

// Bumped when the layout or the key recipe changes, so old entries are never misread.
constexpr const char* kCacheFormat = "ember-triton-cache-1";

struct EntryPaths {
  std::string parent, dir, lock, source, ptx, cubin, meta;
};

EntryPaths entry_paths(const std::string& cache_dir, const std::string& key) {
  EntryPaths p;
  p.parent = cache_dir + "/triton/" + key.substr(0, 2);
  p.dir = p.parent + "/" + key;
  p.lock = p.dir + ".lock";
  p.source = p.dir + "/kernel.py";
  p.ptx = p.dir + "/kernel.ptx";
  p.cubin = p.dir + "/kernel.cubin";
  p.meta = p.dir + "/meta.json";
  return p;
}

// A Python failure in Ember's own compile module (not a kernel's): the pool or the toolchain.
[[noreturn]] void fail_python(const std::string& what) {
  std::string message = pybridge::take_error_message();
  throw TritonBuildError("Ember's Triton compiler: " + what + ": " + message, message);
}

PyRef checked(PyObject* result, const char* what) {
  if (!result) fail_python(what);
  return PyRef::steal(result);
}

PyRef import(const char* module) { return checked(PyImport_ImportModule(module), module); }

PyRef call(const PyRef& module, const char* function, PyObject* args) {
  PyRef fn = checked(PyObject_GetAttrString(module.get(), function), function);
  return checked(PyObject_CallObject(fn.get(), args), function);
}

PyRef py_str(const std::string& s) { return checked(PyUnicode_FromStringAndSize(s.data(), s.size()), "str"); }

// ---- reading a worker's result or a meta.json (the same fields) ----

std::optional<int64_t> get_int(PyObject* dict, const char* name) {
  PyObject* value = PyDict_GetItemString(dict, name);  // borrowed
  if (!value || !PyLong_Check(value)) return std::nullopt;
  long long v = PyLong_AsLongLong(value);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return v;
}

// A str, or the bytes of a bytes object.
std::optional<std::string> get_text(PyObject* dict, const char* name) {
  PyObject* value = PyDict_GetItemString(dict, name);  // borrowed
  if (!value) return std::nullopt;
  if (PyBytes_Check(value)) return std::string(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
  Py_ssize_t size;
  const char* text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, &size) : nullptr;
  if (!text) {
    PyErr_Clear();
    return std::nullopt;
  }
  return std::string(text, size);
}

// The launch metadata of `dict` into `binary`; false if a field is missing or mistyped.
bool read_metadata(PyObject* dict, TritonBinary* binary) {
  auto entry = get_text(dict, "entry");
  auto num_warps = get_int(dict, "num_warps");
  auto num_ctas = get_int(dict, "num_ctas");
  auto shared = get_int(dict, "shared");
  auto global_size = get_int(dict, "global_scratch_size");
  auto global_align = get_int(dict, "global_scratch_align");
  auto profile_size = get_int(dict, "profile_scratch_size");
  auto profile_align = get_int(dict, "profile_scratch_align");
  PyObject* types = PyDict_GetItemString(dict, "param_types");  // borrowed
  if (!entry || !num_warps || !num_ctas || !shared || !global_size || !global_align || !profile_size ||
      !profile_align || !types || !PyList_Check(types)) {
    return false;
  }
  binary->entry = *entry;
  binary->num_warps = int(*num_warps);
  binary->num_ctas = int(*num_ctas);
  binary->shared_bytes = *shared;
  binary->global_scratch_bytes = *global_size;
  binary->global_scratch_align = *global_align;
  binary->profile_scratch_bytes = *profile_size;
  binary->profile_scratch_align = *profile_align;
  binary->param_types.clear();
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(types); ++i) {
    const char* type = PyUnicode_Check(PyList_GET_ITEM(types, i)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(types, i)) : nullptr;
    if (!type) {
      PyErr_Clear();
      return false;
    }
    binary->param_types.emplace_back(type);
  }
  return true;
}

// The published entry, or nullopt when it is absent, incomplete, unreadable or its cubin does not
// match the digest in meta.json: the caller rebuilds it.
std::optional<TritonBinary> load_entry(const EntryPaths& p, const std::string& key) {
  std::optional<std::string> meta_text = read_file_if_exists(p.meta);
  if (!meta_text) return std::nullopt;
  std::optional<std::string> cubin = read_file_if_exists(p.cubin);
  if (!cubin) return std::nullopt;
  PyRef json = import("json");
  PyRef loads = checked(PyObject_GetAttrString(json.get(), "loads"), "json.loads");
  PyRef text = PyRef::steal(PyUnicode_DecodeUTF8(meta_text->data(), Py_ssize_t(meta_text->size()), nullptr));
  PyRef meta = text ? PyRef::steal(PyObject_CallFunctionObjArgs(loads.get(), text.get(), nullptr)) : PyRef();
  if (!meta || !PyDict_Check(meta.get())) {
    PyErr_Clear();
    return std::nullopt;
  }
  TritonBinary binary;
  std::optional<std::string> digest = get_text(meta.get(), "cubin_sha256");
  if (!digest || *digest != sha256_hex(*cubin) || !read_metadata(meta.get(), &binary)) return std::nullopt;
  binary.cubin = std::move(*cubin);
  binary.cache_hit = true;
  binary.key = key;
  binary.dir = p.dir;
  return binary;
}

// Publishes a worker's result: the PTX, the cubin, then meta.json (the launch metadata and the
// cubin's digest), each by atomic rename. Returns false if the result lacks a field.
bool publish_entry(const EntryPaths& p, const std::string& key, PyObject* result, TritonBinary* binary) {
  std::optional<std::string> cubin = get_text(result, "cubin");
  std::optional<std::string> ptx = get_text(result, "ptx");
  if (!cubin || !ptx || !read_metadata(result, binary)) return false;
  PyRef meta = checked(PyDict_Copy(result), "dict");
  if (PyDict_DelItemString(meta.get(), "cubin") != 0 || PyDict_DelItemString(meta.get(), "ptx") != 0 ||
      PyDict_SetItemString(meta.get(), "cubin_sha256", py_str(sha256_hex(*cubin)).get()) != 0 ||
      PyDict_SetItemString(meta.get(), "key", py_str(key).get()) != 0) {
    fail_python("meta.json");
  }
  PyRef json = import("json");
  PyRef dumps = checked(PyObject_GetAttrString(json.get(), "dumps"), "json.dumps");
  PyRef args = checked(PyTuple_Pack(1, meta.get()), "args");
  PyRef kwargs = checked(Py_BuildValue("{s:O,s:i}", "sort_keys", Py_True, "indent", 1), "kwargs");
  PyRef text = checked(PyObject_Call(dumps.get(), args.get(), kwargs.get()), "json.dumps");
  Py_ssize_t size;
  const char* meta_text = PyUnicode_AsUTF8AndSize(text.get(), &size);
  if (!meta_text) fail_python("meta.json");
  write_file_atomic(p.ptx, *ptx);
  write_file_atomic(p.cubin, *cubin);
  write_file_atomic(p.meta, std::string_view(meta_text, size));
  binary->cubin = std::move(*cubin);
  binary->cache_hit = false;
  binary->key = key;
  binary->dir = p.dir;
  return true;
}

std::string cache_key(const TritonCompileJob& job, const TritonTarget& target, const std::string& toolchain) {
  Sha256 h;
  add_key_field(h, "format", kCacheFormat);
  add_key_field(h, "toolchain", toolchain);
  add_key_field(h, "target", target.str());
  add_key_field(h, "source", job.source);
  add_key_field(h, "name", job.name);
  for (const auto& [name, type] : job.signature) {
    add_key_field(h, "param", name);
    add_key_field(h, "type", type);
  }
  for (const auto& [name, value] : job.constexprs) {
    add_key_field(h, "constexpr", name);
    add_key_field(h, "value", std::to_string(value));
  }
  for (int index : job.divisible_by_16) add_key_field(h, "divisible", std::to_string(index));
  add_key_field(h, "num_warps", std::to_string(job.num_warps));
  add_key_field(h, "num_stages", std::to_string(job.num_stages));
  add_key_field(h, "debug", job.debug ? "1" : "0");
  return Sha256::hex(h.finish());
}

PyRef target_tuple(const TritonTarget& target) {
  return checked(Py_BuildValue("(sii)", target.backend.c_str(), target.capability, target.warp_size), "target");
}

// The dict compile.py's _compile_one takes.
PyRef job_dict(const TritonCompileJob& job, const TritonTarget& target) {
  PyRef signature = checked(PyList_New(0), "list");
  for (const auto& [name, type] : job.signature) {
    PyRef pair = checked(Py_BuildValue("(ss)", name.c_str(), type.c_str()), "signature");
    if (PyList_Append(signature.get(), pair.get()) != 0) fail_python("signature");
  }
  PyRef constexprs = checked(PyList_New(0), "list");
  for (const auto& [name, value] : job.constexprs) {
    PyRef pair = checked(Py_BuildValue("(sL)", name.c_str(), (long long)value), "constexprs");
    if (PyList_Append(constexprs.get(), pair.get()) != 0) fail_python("constexprs");
  }
  PyRef divisible = checked(PyList_New(0), "list");
  for (int index : job.divisible_by_16) {
    PyRef i = checked(PyLong_FromLong(index), "int");
    if (PyList_Append(divisible.get(), i.get()) != 0) fail_python("divisible");
  }
  PyRef options = checked(Py_BuildValue("{s:i,s:i,s:O}", "num_warps", job.num_warps, "num_stages", job.num_stages,
                                        "debug", job.debug ? Py_True : Py_False),
                          "options");
  return checked(Py_BuildValue("{s:N,s:N,s:O,s:O,s:O,s:O,s:N}", "source", py_str(job.source).release(), "name",
                               py_str(job.name).release(), "signature", signature.get(), "constexprs",
                               constexprs.get(), "divisible", divisible.get(), "options", options.get(), "target",
                               target_tuple(target).release()),
                 "job");
}

// Waits for flock without the GIL: the holder may be another thread of this process that needs the
// GIL to finish its compile (and other threads should run meanwhile anyway).
std::unique_ptr<FileLock> lock_without_gil(const std::string& path) {
  struct Released {
    PyThreadState* state = PyEval_SaveThread();
    ~Released() { PyEval_RestoreThread(state); }
  } released;
  return std::make_unique<FileLock>(path);
}

}  // namespace

std::string triton_error_summary(const std::string& detail) {
  size_t end = detail.find_last_not_of("\n ");
  if (end == std::string::npos) return detail;
  size_t start = detail.rfind('\n', end);
  return detail.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

std::string TritonTarget::str() const { return backend + ":" + std::to_string(capability); }

TritonCompileJob compile_job(const TritonJob& job) {
  TritonCompileJob compile;
  compile.source = job.kernel->source;
  compile.name = job.kernel->name;
  compile.signature = job.kernel->signature();
  compile.constexprs = job.config->blocks;
  compile.num_warps = job.config->num_warps;
  compile.num_stages = job.config->num_stages;
  compile.debug = !job.kernel->check_sites.empty();
  return compile;
}

std::vector<TritonBinary> build_triton(const std::vector<TritonJob>& jobs, const TritonBuildOptions& options) {
  std::vector<TritonCompileJob> compile_jobs;
  compile_jobs.reserve(jobs.size());
  for (const TritonJob& job : jobs) compile_jobs.push_back(compile_job(job));
  return build_triton(compile_jobs, options);
}

std::vector<TritonBinary> build_triton_each(const std::vector<TritonCompileJob>& jobs, const TritonBuildOptions& options,
                                            std::vector<std::string>* errors) {
  std::vector<TritonBinary> binaries(jobs.size());
  errors->assign(jobs.size(), "");
  if (jobs.empty()) return binaries;
  uid_t owner = geteuid();
  ensure_private_dir(options.cache_dir, owner);
  ensure_private_dir(options.cache_dir + "/triton", owner);
  PyRef compiler = import("ember._triton.compile");
  PyRef toolchain_text = call(compiler, "fingerprint", target_tuple(options.target).get());
  Py_ssize_t size;
  const char* toolchain = PyUnicode_AsUTF8AndSize(toolchain_text.get(), &size);
  if (!toolchain) fail_python("fingerprint");

  // Hits first; misses grouped by key (identical jobs compile once), in key order.
  std::vector<std::string> keys(jobs.size());
  std::map<std::string, std::vector<size_t>> misses;
  for (size_t i = 0; i < jobs.size(); ++i) {
    keys[i] = cache_key(jobs[i], options.target, std::string(toolchain, size));
    if (auto binary = load_entry(entry_paths(options.cache_dir, keys[i]), keys[i])) {
      binaries[i] = std::move(*binary);
    } else {
      misses[keys[i]].push_back(i);
    }
  }
  if (misses.empty()) return binaries;

  // Lock every miss, in key order (no two batches can each hold a lock the other waits for), and
  // look again: another process may have published the entry meanwhile.
  std::vector<std::unique_ptr<FileLock>> locks;
  std::vector<const std::string*> to_compile;
  for (const auto& [key, indices] : misses) {
    EntryPaths p = entry_paths(options.cache_dir, key);
    ensure_private_dir(p.parent, owner);
    locks.push_back(lock_without_gil(p.lock));
    if (auto binary = load_entry(p, key)) {
      for (size_t i : indices) binaries[i] = *binary;
      continue;
    }
    ensure_private_dir(p.dir, owner);
    write_file_atomic(p.source, jobs[indices[0]].source);
    to_compile.push_back(&key);
  }
  if (to_compile.empty()) return binaries;

  PyRef batch = checked(PyList_New(0), "list");
  for (const std::string* key : to_compile) {
    PyRef job = job_dict(jobs[misses[*key][0]], options.target);
    if (PyList_Append(batch.get(), job.get()) != 0) fail_python("jobs");
  }
  PyRef args = checked(Py_BuildValue("(Oi)", batch.get(), options.workers), "args");
  PyRef results = call(compiler, "compile_kernels", args.get());
  if (!PyList_Check(results.get()) || size_t(PyList_GET_SIZE(results.get())) != to_compile.size()) {
    throw TritonBuildError("Ember's Triton compiler: compile_kernels returned no list of results", "");
  }

  for (size_t k = 0; k < to_compile.size(); ++k) {
    const std::string& key = *to_compile[k];
    const std::vector<size_t>& indices = misses[key];
    PyObject* result = PyList_GET_ITEM(results.get(), k);  // borrowed
    std::optional<std::string> error =
        PyDict_Check(result) ? get_text(result, "error") : std::optional<std::string>("not a dict");
    TritonBinary binary;
    if (!error && !publish_entry(entry_paths(options.cache_dir, key), key, result, &binary)) {
      error = "the compile worker's result lacks a field";
    }
    for (size_t i : indices) {
      if (error) {
        (*errors)[i] = *error;
        binaries[i].key = key;  // names the entry whose kernel.py failed
      } else {
        binaries[i] = binary;
      }
    }
  }
  return binaries;
}

std::vector<TritonBinary> build_triton(const std::vector<TritonCompileJob>& jobs, const TritonBuildOptions& options) {
  std::vector<std::string> errors;
  std::vector<TritonBinary> binaries = build_triton_each(jobs, options, &errors);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (errors[i].empty()) continue;
    std::string source = entry_paths(options.cache_dir, binaries[i].key).source;
    throw TritonBuildError("Triton could not compile kernel " + jobs[i].name + " (job " + std::to_string(i) +
                               ", " + source + "): " + triton_error_summary(errors[i]),
                           errors[i]);
  }
  return binaries;
}

}  // namespace ember::runtime
