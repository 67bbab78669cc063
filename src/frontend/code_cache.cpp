// The per-code cache in co_extra, its registry, and the once-per-code skip decision.
// See code_cache.h for the contract; docs/frame-hook.md for the design.
#include "frontend/code_cache.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "frontend/cpython/shim.h"
#include "frontend/region.h"

namespace ember::frontend {

// Every code object holding a CodeCache, in the order the caches were created. An intrusive list:
// linking and unlinking are O(1) and allocation-free, which matters in the co_extra free function.
class CodeCacheRegistry {
 public:
  static void link(CodeCache* cache) {
    cache->prev_ = tail_;
    cache->next_ = nullptr;
    if (tail_ != nullptr) {
      tail_->next_ = cache;
    } else {
      head_ = cache;
    }
    tail_ = cache;
    ++count_;
  }

  static void unlink(CodeCache* cache) {
    if (cache->prev_ != nullptr) {
      cache->prev_->next_ = cache->next_;
    } else {
      head_ = cache->next_;
    }
    if (cache->next_ != nullptr) {
      cache->next_->prev_ = cache->prev_;
    } else {
      tail_ = cache->prev_;
    }
    cache->prev_ = cache->next_ = nullptr;
    --count_;
  }

  // `visit` must not run Python code: nothing may link or unlink meanwhile.
  template <typename Visit>
  static void for_each(Visit visit) {
    for (CodeCache* cache = head_; cache != nullptr; cache = cache->next_) {
      visit(*cache);
    }
  }

  static int count() { return count_; }

 private:
  static inline CodeCache* head_ = nullptr;
  static inline CodeCache* tail_ = nullptr;
  static inline int count_ = 0;
};

namespace {

// An owned reference, released on scope exit.
class Ref {
 public:
  explicit Ref(PyObject* object) : object_(object) {}
  ~Ref() { Py_XDECREF(object_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  PyObject* object_;
};

// Directory prefixes, each ending in '/', in their spelling as found and resolved through
// symbolic links when that differs.
struct SkipDirectories {
  std::vector<std::string> ember;
  std::vector<std::string> torch;
  std::vector<std::string> stdlib;
  std::vector<std::string> site_packages;  // inside a stdlib directory in a virtualenv; not skipped
};

Py_ssize_t g_extra_index = -1;
// Never freed: code objects can die during interpreter finalization and still consult it.
const SkipDirectories* g_directories = nullptr;

void add_directory(std::vector<std::string>& out, std::string path) {
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  if (path.empty()) {
    return;
  }
  out.push_back(path + "/");
  if (char* resolved = ::realpath(path.c_str(), nullptr)) {
    std::string real = std::string(resolved) + "/";
    std::free(resolved);
    if (real != out.back()) {
      out.push_back(real);
    }
  }
}

// A str path in the file system encoding (what co_filename holds is compared byte-wise).
bool fs_string(PyObject* path, std::string* out) {
  Ref bytes(PyUnicode_EncodeFSDefault(path));
  if (!bytes) {
    return false;
  }
  out->assign(PyBytes_AS_STRING(bytes.get()), PyBytes_GET_SIZE(bytes.get()));
  return true;
}

bool add_sysconfig_paths(PyObject* paths, std::initializer_list<const char*> keys,
                         std::vector<std::string>& out) {
  for (const char* key : keys) {
    PyObject* value = PyDict_GetItemString(paths, key);  // borrowed
    if (value == nullptr || !PyUnicode_Check(value)) {
      continue;
    }
    std::string path;
    if (!fs_string(value, &path)) {
      return false;
    }
    add_directory(out, path);
  }
  return true;
}

std::string parent_directory(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash);
}

// The standard library per sysconfig ('stdlib', 'platstdlib'; in a virtualenv 'platstdlib' is the
// directory that holds site-packages, hence the site-packages exclusions), the directory of the
// ember package, and torch's package directory if torch is installed (found without importing it).
bool read_skip_directories(SkipDirectories* dirs) {
  Ref sysconfig(PyImport_ImportModule("sysconfig"));
  if (!sysconfig) {
    return false;
  }
  Ref paths(PyObject_CallMethod(sysconfig.get(), "get_paths", nullptr));
  if (!paths) {
    return false;
  }
  if (!PyDict_Check(paths.get())) {
    PyErr_SetString(PyExc_TypeError, "Ember: sysconfig.get_paths() did not return a dict");
    return false;
  }
  if (!add_sysconfig_paths(paths.get(), {"stdlib", "platstdlib"}, dirs->stdlib) ||
      !add_sysconfig_paths(paths.get(), {"purelib", "platlib"}, dirs->site_packages)) {
    return false;
  }

  Ref ember(PyImport_ImportModule("ember"));
  if (!ember) {
    return false;
  }
  Ref ember_file(PyObject_GetAttrString(ember.get(), "__file__"));
  std::string ember_path;
  if (!ember_file || !PyUnicode_Check(ember_file.get()) ||
      !fs_string(ember_file.get(), &ember_path)) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "Ember: the ember package has no __file__");
    }
    return false;
  }
  add_directory(dirs->ember, parent_directory(ember_path));

  Ref util(PyImport_ImportModule("importlib.util"));
  if (!util) {
    return false;
  }
  Ref spec(PyObject_CallMethod(util.get(), "find_spec", "s", "torch"));
  if (!spec) {
    return false;
  }
  if (spec.get() == Py_None) {
    return true;
  }
  Ref locations(PyObject_GetAttrString(spec.get(), "submodule_search_locations"));
  if (!locations) {
    return false;
  }
  if (locations.get() == Py_None) {
    return true;
  }
  Ref iterator(PyObject_GetIter(locations.get()));
  if (!iterator) {
    return false;
  }
  while (PyObject* item = PyIter_Next(iterator.get())) {
    Ref location(item);
    std::string path;
    if (PyUnicode_Check(item)) {
      if (!fs_string(item, &path)) {
        return false;
      }
      add_directory(dirs->torch, path);
    }
  }
  return !PyErr_Occurred();
}

bool has_prefix(const std::string& path, const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    if (path.compare(0, prefix.size(), prefix) == 0) {
      return true;
    }
  }
  return false;
}

bool is_ember_model(const std::string& path, const std::vector<std::string>& ember_dirs) {
  for (const std::string& dir : ember_dirs)
    if (path.compare(0, dir.size(), dir) == 0 && path.compare(dir.size(), 7, "models/") == 0) return true;
  return false;
}

SkipReason classify_path(const std::string& path, const SkipDirectories& dirs) {
  // Ember and torch first: either may be installed in site-packages. Ember's reference models
  // (ember/models/) are user code like any other.
  if (has_prefix(path, dirs.ember) && !is_ember_model(path, dirs.ember)) {
    return SkipReason::ember_file;
  }
  if (has_prefix(path, dirs.torch)) {
    return SkipReason::torch_file;
  }
  if (has_prefix(path, dirs.stdlib) && !has_prefix(path, dirs.site_packages)) {
    return SkipReason::stdlib_file;
  }
  return SkipReason::none;
}

bool decide_skip(PyCodeObject* code, SkipReason* reason) {
  if (ember_shim_code_is_generator(code)) {
    *reason = SkipReason::generator;
    return true;
  }
  if ((code->co_flags & CO_OPTIMIZED) == 0) {
    *reason = SkipReason::not_a_function;
    return true;
  }
  std::string path;
  if (!fs_string(code->co_filename, &path)) {
    return false;
  }
  // Frozen modules (importlib, os, ...) are standard library without a file.
  if (path.compare(0, 8, "<frozen ") == 0) {
    *reason = SkipReason::stdlib_file;
    return true;
  }
  *reason = classify_path(path, *g_directories);
  if (*reason == SkipReason::none && !path.empty() && path[0] == '/') {
    if (char* resolved = ::realpath(path.c_str(), nullptr)) {
      *reason = classify_path(resolved, *g_directories);
      std::free(resolved);
    }
  }
  return true;
}

// Runs when a code object holding a cache dies (CPython calls it with the GIL held). The cache
// leaves the registry before its entries are destroyed, since their destructors may run Python
// code that walks the registry.
void free_code_cache(void* extra) {
  auto* cache = static_cast<CodeCache*>(extra);
  if (cache == nullptr) {
    return;
  }
  CodeCacheRegistry::unlink(cache);
  delete cache;
}

}  // namespace

const char* skip_reason_name(SkipReason reason) {
  switch (reason) {
    case SkipReason::none:
      return nullptr;
    case SkipReason::generator:
      return "generator";
    case SkipReason::not_a_function:
      return "not_a_function";
    case SkipReason::torch_file:
      return "torch_file";
    case SkipReason::ember_file:
      return "ember_file";
    case SkipReason::stdlib_file:
      return "stdlib_file";
    case SkipReason::generated:
      return "generated";
  }
  return nullptr;
}

const CompilerCache* CodeCache::find(const FrameCompiler* compiler) const {
  for (const CompilerCache& state : compilers_) {
    if (state.compiler == compiler) {
      return &state;
    }
  }
  return nullptr;
}

CompilerCache& CodeCache::find_or_add(FrameCompiler* compiler) {
  for (CompilerCache& state : compilers_) {
    if (state.compiler == compiler) {
      return state;
    }
  }
  compilers_.push_back(CompilerCache{compiler, nullptr, false, nullptr});
  return compilers_.back();
}

void CodeCache::add_entry(FrameCompiler* compiler, std::shared_ptr<CacheEntry> entry) {
  CompilerCache& state = find_or_add(compiler);
  // Another thread may have hit the limit while this one compiled: such a code runs eagerly
  // from now on, so the entry would never be looked at.
  if (state.over_limit) {
    return;
  }
  auto entries = std::make_shared<EntryList>();
  entries->reserve((state.entries ? state.entries->size() : 0) + 1);
  entries->push_back(std::move(entry));
  if (state.entries) {
    entries->insert(entries->end(), state.entries->begin(), state.entries->end());
  }
  // The old list's entries all live on in the new one: nothing is destroyed here.
  state.entries = std::move(entries);
}

void CodeCache::note_hit(FrameCompiler* compiler, const CacheEntry* entry, size_t index) {
  auto it = std::find_if(compilers_.begin(), compilers_.end(),
                         [&](const CompilerCache& state) { return state.compiler == compiler; });
  if (it == compilers_.end()) {
    return;  // forgotten while the guards ran
  }
  CompilerCache& state = *it;
  bool again = state.last_hit == entry;
  state.last_hit = entry;
  if (index == 0 || !again || !state.entries) {
    return;
  }
  // The list may have changed since the lookup took its snapshot: search for the entry.
  auto entries = std::make_shared<EntryList>();
  entries->reserve(state.entries->size());
  for (const std::shared_ptr<CacheEntry>& candidate : *state.entries) {
    if (candidate.get() == entry) {
      entries->push_back(candidate);
    }
  }
  if (entries->empty()) {
    return;
  }
  for (const std::shared_ptr<CacheEntry>& candidate : *state.entries) {
    if (candidate.get() != entry) {
      entries->push_back(candidate);
    }
  }
  state.entries = std::move(entries);
}

EntryListRef CodeCache::mark_over_limit(FrameCompiler* compiler, bool* newly_marked) {
  CompilerCache& state = find_or_add(compiler);
  *newly_marked = !state.over_limit;
  state.over_limit = true;
  return std::move(state.entries);
}

EntryListRef CodeCache::forget(const FrameCompiler* compiler) {
  for (size_t i = 0; i < compilers_.size(); ++i) {
    if (compilers_[i].compiler == compiler) {
      EntryListRef entries = std::move(compilers_[i].entries);
      compilers_.erase(compilers_.begin() + static_cast<std::ptrdiff_t>(i));
      return entries;
    }
  }
  return nullptr;
}

std::vector<EntryListRef> CodeCache::forget_all() {
  std::vector<EntryListRef> dropped;
  for (CompilerCache& state : compilers_) {
    if (state.entries) {
      dropped.push_back(std::move(state.entries));
    }
  }
  compilers_.clear();
  return dropped;
}

bool prepare_code_caches() {
  if (g_extra_index >= 0 && g_directories != nullptr) {
    return true;
  }
  RegionPause pause;  // the Python code below must not reach a compiler
  if (g_extra_index < 0) {
    Py_ssize_t index = ember_shim_request_code_extra_index(&free_code_cache);
    if (index < 0) {
      return false;
    }
    g_extra_index = index;
  }
  auto* dirs = new SkipDirectories();
  if (!read_skip_directories(dirs)) {
    delete dirs;
    return false;
  }
  g_directories = dirs;
  return true;
}

CodeCache* existing_code_cache(PyCodeObject* code) {
  if (g_extra_index < 0) {
    return nullptr;
  }
  void* extra = nullptr;
  if (ember_shim_code_get_extra(reinterpret_cast<PyObject*>(code), g_extra_index, &extra) < 0) {
    return nullptr;
  }
  return static_cast<CodeCache*>(extra);
}

namespace {

// Creates the code object's cache with `skip`, or returns the existing one (`*existed`).
CodeCache* attach_cache(PyCodeObject* code, const SkipReason* forced, bool* existed) {
  *existed = false;
  if (g_extra_index < 0 || g_directories == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "Ember: code caches used before prepare_code_caches()");
    return nullptr;
  }
  void* extra = nullptr;
  if (ember_shim_code_get_extra(reinterpret_cast<PyObject*>(code), g_extra_index, &extra) < 0) {
    return nullptr;
  }
  if (extra != nullptr) {
    *existed = true;
    return static_cast<CodeCache*>(extra);
  }
  SkipReason skip = SkipReason::none;
  if (forced) {
    skip = *forced;
  } else if (!decide_skip(code, &skip)) {
    return nullptr;
  }
  auto* cache = new CodeCache(code, skip);
  if (ember_shim_code_set_extra(reinterpret_cast<PyObject*>(code), g_extra_index, cache) < 0) {
    delete cache;
    return nullptr;
  }
  CodeCacheRegistry::link(cache);
  return cache;
}

}  // namespace

CodeCache* code_cache_for(PyCodeObject* code) {
  bool existed = false;
  return attach_cache(code, nullptr, &existed);
}

bool mark_generated_code(PyCodeObject* code) {
  SkipReason generated = SkipReason::generated;
  bool existed = false;
  if (!attach_cache(code, &generated, &existed)) return false;
  if (existed) {
    PyErr_SetString(PyExc_RuntimeError, "Ember: a generated code object already had a cache");
    return false;
  }
  return true;
}

void clear_all_code_caches() {
  std::vector<EntryListRef> dropped;
  CodeCacheRegistry::for_each([&](CodeCache& cache) {
    for (EntryListRef& entries : cache.forget_all()) {
      dropped.push_back(std::move(entries));
    }
  });
  // `dropped` goes out of scope here, after the walk: entry destructors may run Python code.
}

void forget_compiler_everywhere(const FrameCompiler* compiler) {
  std::vector<EntryListRef> dropped;
  CodeCacheRegistry::for_each([&](CodeCache& cache) {
    if (EntryListRef entries = cache.forget(compiler)) {
      dropped.push_back(std::move(entries));
    }
  });
}

int registered_code_count() { return CodeCacheRegistry::count(); }

}  // namespace ember::frontend
