// Bindings of the compiler driver and code cache (src/runtime/cpp_compiler.h) as ember._C.codecache.
// Options arrive as keyword arguments already resolved in Python (python/ember/options.py reads
// CXX and EMBER_CACHE_DIR). sha256, ensure_cache_dir, LoadedLibrary.call_i64 and the loaded-library
// queries exist for tests. CodeCache is the compile context: each Python instance has memos of its
// own (its compiler versions, header digests, precompiled headers), so a test can start from empty
// ones; loaded libraries are process-wide, kept loaded while a LoadedLibrary object (or a compiled
// graph) holds them.
// CompileError and CacheError become Python exceptions of those names (RuntimeError subclasses);
// CompileError carries .command_line, .compiler_output and .source_path.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cpp_compiler.h"
#include "runtime/isa.h"
#include "support/sha256.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ember::python {

namespace {

PyObject* compile_error_type = nullptr;
PyObject* cache_error_type = nullptr;

runtime::CppCompileOptions options_from(std::string compiler, std::vector<std::string> include_dirs,
                                        std::string cache_dir, const std::string& isa, bool openmp,
                                        std::string precompiled_header) {
  runtime::CppCompileOptions o;
  o.compiler = std::move(compiler);
  o.include_dirs = std::move(include_dirs);
  o.cache_dir = std::move(cache_dir);
  o.isa = runtime::parse_isa(isa.c_str());
  o.openmp = openmp;
  o.precompiled_header = std::move(precompiled_header);
  return o;
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const runtime::CompileError& e) {
    nb::object error = nb::steal(PyObject_CallFunction(compile_error_type, "s", e.what()));
    if (!error.is_valid()) return;  // the call set a Python error already
    error.attr("command_line") = nb::str(e.command_line.c_str(), e.command_line.size());
    error.attr("compiler_output") = nb::str(e.compiler_output.c_str(), e.compiler_output.size());
    error.attr("source_path") = nb::str(e.source_path.c_str(), e.source_path.size());
    PyErr_SetObject(compile_error_type, error.ptr());
  } catch (const runtime::CacheError& e) {
    PyErr_SetString(cache_error_type, e.what());
  }
}

}  // namespace

void bind_codecache(nb::module_& m) {
  compile_error_type = PyErr_NewException("ember._C.codecache.CompileError", PyExc_RuntimeError, nullptr);
  cache_error_type = PyErr_NewException("ember._C.codecache.CacheError", PyExc_RuntimeError, nullptr);
  m.attr("CompileError") = nb::handle(compile_error_type);
  m.attr("CacheError") = nb::handle(cache_error_type);
  nb::register_exception_translator(translate);

  m.def(
      "sha256",
      [](nb::bytes data, bool portable) {
        return sha256_hex(std::string_view(data.c_str(), data.size()), !portable);
      },
      "data"_a, "portable"_a = false);
  m.def("detect_isa", [] { return std::string(runtime::isa_name(runtime::detect_isa())); });
  m.def(
      "compile_flags",
      [](std::string compiler, std::vector<std::string> include_dirs, std::string cache_dir, const std::string& isa,
         bool openmp, std::string pch) {
        return runtime::compile_flags(options_from(compiler, include_dirs, cache_dir, isa, openmp, pch));
      },
      "compiler"_a = "g++", "include_dirs"_a = std::vector<std::string>{}, "cache_dir"_a = "", "isa"_a = "scalar",
      "openmp"_a = true, "precompiled_header"_a = "");
  nb::class_<runtime::LoadedLibrary>(m, "LoadedLibrary")
      .def_prop_ro("path", &runtime::LoadedLibrary::path)
      .def_prop_ro("key", &runtime::LoadedLibrary::key)
      .def(
          "call_i64",
          [](const runtime::LoadedLibrary& self, const std::string& symbol, int64_t arg) {
            return reinterpret_cast<int64_t (*)(int64_t)>(self.symbol(symbol.c_str()))(arg);
          },
          "symbol"_a, "arg"_a, "Calls `int64_t symbol(int64_t)` of the library.");
  nb::class_<runtime::CodeCache>(m, "CodeCache")
      .def(nb::init<>())
      .def(
          "cache_key",
          [](runtime::CodeCache& self, const std::string& source, std::string compiler,
             std::vector<std::string> include_dirs, std::string cache_dir, const std::string& isa, bool openmp,
             std::string pch) {
            return self.cache_key(source, options_from(compiler, include_dirs, cache_dir, isa, openmp, pch));
          },
          "source"_a, "compiler"_a = "g++", "include_dirs"_a = std::vector<std::string>{}, "cache_dir"_a = "",
          "isa"_a = "scalar", "openmp"_a = true, "precompiled_header"_a = "")
      .def(
          "compile_and_load",
          [](runtime::CodeCache& self, const std::string& source, std::string compiler,
             std::vector<std::string> include_dirs, std::string cache_dir, const std::string& isa, bool openmp,
             std::string pch, bool pch_in_background) {
            runtime::CppCompileOptions o = options_from(compiler, include_dirs, cache_dir, isa, openmp, pch);
            o.precompiled_header_in_background = pch_in_background;
            runtime::CompileResult r;
            {
              nb::gil_scoped_release release;
              r = self.compile_and_load(source, o);
            }
            return nb::make_tuple(r.library, r.cache_hit, r.seconds);
          },
          "source"_a, "compiler"_a, "include_dirs"_a, "cache_dir"_a, "isa"_a = "scalar", "openmp"_a = true,
          "precompiled_header"_a = "", "precompiled_header_in_background"_a = false,
          "Returns (LoadedLibrary, cache_hit, seconds); the library stays loaded while it is referenced.")
      .def("compiler_version", &runtime::CodeCache::compiler_version, "compiler"_a);
  m.def(
      "ensure_cache_dir", [](const std::string& dir, uint32_t uid) { runtime::ensure_cache_dir(dir, uid); },
      "dir"_a, "uid"_a);
  m.def("is_loaded", [](const std::string& key) { return runtime::find_loaded(key) != nullptr; }, "key"_a);
  m.def("loaded_library_count", &runtime::loaded_library_count);
}

}  // namespace ember::python
