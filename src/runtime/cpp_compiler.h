// The C++ compiler driver and disk code cache: generated C++ source in, a loaded shared object out.
//
// Needs: a g++-compatible compiler (options.compiler: one program, found on PATH or by path) and a
// cache directory owned by this user (options.cache_dir; Python resolves EMBER_CACHE_DIR).
// Guarantees:
//  - An artifact is named by cache_key(): sha256 over the source, every compiler flag, the
//    compiler's `--version` line, the ISA and the bytes of every file under the include dirs, so
//    any change to what the compiler sees is a different key.
//  - Layout: <cache_dir>/cpp/<key[0:2]>/<key>.{so,sha256,cpp,lock}. Files appear only by
//    rename(2) of a fsync()ed temporary in the same directory, the digest sidecar before the .so,
//    so no process ever reads half a file. An entry whose .so does not match its digest (or does
//    not dlopen) is rebuilt.
//  - Compile-and-publish holds flock(<key>.lock): processes sharing a cache compile a key once;
//    loading an entry that is already published takes no lock.
//  - The cache directory is created 0700 and refused (CacheError) unless it is owned by this user
//    and not writable by group or others, following a symlink to check the real directory.
//  - A precompiled header, if asked for, is itself an entry <cache_dir>/pch/<key>/<header>.gch
//    with the same publication, digest and lock rules, checked once per process.
//  - Libraries are memoized in-process by key and never dlclosed while a LoadedLibrary reference
//    lives; the memo itself holds one, so a loaded library stays until process exit.
//
// Process-wide state, and why each piece is process-wide rather than owned by a compile context.
// None of it is configuration (every setting arrives in CppCompileOptions); each is a memo keyed by
// everything that determines its value, guarded by its own mutex:
//  - loaded libraries, by cache key: a dlopen()ed library is a process resource, compiled graphs of
//    every Compiler hold code pointers into it, and two Compilers compiling the same source must
//    share one load; it must outlive any one Compiler.
//  - a file's sha256 under the include dirs, by path, reused only while its inode, size and times
//    match (a changed header is rehashed);
//  - the compiler's `--version` line, by compiler path (a compiler replaced in place during a run is
//    not noticed until the next process: the documented cost of not spawning it per compile);
//  - precompiled headers verified on disk, by PCH key; background PCH builds started, by (cache dir,
//    compiler, header): at most one thread per process builds a PCH. The detached thread outlives
//    the compile that started it, so this state cannot belong to a Compiler without shared ownership.
// Moving the last three into a CodeCache object that the Compiler owns (for isolation in tests)
// needs the object passed from the pipeline driver through compile_graph into compile_and_load.
// Python-free, so it can move into the core library.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/isa.h"

namespace ember::runtime {

struct CppCompileOptions {
  std::string compiler;                   // from $CXX (python/ember/options.py) else "g++"
  std::vector<std::string> include_dirs;  // where ember/vec.h lives; every file under them is hashed
  std::string cache_dir;                  // EMBER_CACHE_DIR, default ~/.cache/ember
  Isa isa = Isa::Scalar;
  bool openmp = true;
  // A header under include_dirs (e.g. "ember/vec.h") to precompile once per (compiler, flags,
  // header bytes) and reuse: it saves most of a compile when the source's first line includes it
  // (GCC ignores a PCH included after any other token). Empty: no PCH. The PCH is only a speed-up:
  // if it cannot be built, sources compile without it.
  std::string precompiled_header;
  // When the PCH is not built yet: build it on a background thread and compile this source
  // without it (the first compile of a process never waits for the PCH), instead of building it
  // first. The PCH changes compile time only, never the cache key or the code.
  bool precompiled_header_in_background = false;
};

// Every flag but the input and output files, in command-line order. Never -ffast-math (on gcc < 13
// it links crtfastmath.o, which turns on flush-to-zero for the whole process).
std::vector<std::string> compile_flags(const CppCompileOptions& options);

// The compiler failed, or its output did not load. what() says which, with the command line.
struct CompileError : std::runtime_error {
  CompileError(const std::string& message, std::string command_line, std::string compiler_output,
               std::string source_path);
  std::string command_line;
  std::string compiler_output;  // the compiler's stderr and stdout, whole (or dlerror() text)
  std::string source_path;      // where the failing source was kept (<key>.failed.cpp), or empty
};

// The cache directory cannot be used safely (owner, permissions, I/O): what() names the path, the
// problem and how to fix it.
struct CacheError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A dlopen()ed shared object, dlclosed when the last reference goes.
class LoadedLibrary {
 public:
  // RTLD_NOW | RTLD_LOCAL: unresolved symbols fail here, not at the first call.
  // Throws std::runtime_error with dlerror()'s text.
  static std::shared_ptr<LoadedLibrary> open(const std::string& path, const std::string& key);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  // Throws std::runtime_error naming the missing symbol and the library.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }
  const std::string& key() const { return key_; }

 private:
  LoadedLibrary(void* handle, std::string path, std::string key);
  void* handle_;
  std::string path_;
  std::string key_;
};

struct CompileResult {
  std::shared_ptr<LoadedLibrary> library;
  bool cache_hit = false;  // false only when this call ran the compiler
  double seconds = 0;      // wall time of the call
};

// Compiles `source` to a shared object through the disk cache and loads it; memoized in memory by
// key (a second call with the same key returns the same LoadedLibrary without touching the disk).
// Thread-safe; concurrent calls for one key compile it once. Throws CompileError / CacheError.
CompileResult compile_and_load(const std::string& source, const CppCompileOptions& options);

// The library a compile_and_load of this key loaded in this process, or nullptr.
std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key);

// Hex sha256 naming the artifact (see the file comment). Runs `<compiler> --version` once per
// compiler string. Throws CompileError if the compiler cannot run, CacheError if an include dir
// cannot be read.
std::string cache_key(const std::string& source, const CppCompileOptions& options);

// The first line of `<compiler> --version`, memoized per compiler string.
std::string compiler_version(const std::string& compiler);

// Creates `dir` (parents as mkdir -p, `dir` itself 0700) and checks it: it must be a directory
// (after following symlinks) owned by `owner` and not writable by group or others. Throws
// CacheError naming the path, the problem and the fix. compile_and_load uses geteuid().
void ensure_cache_dir(const std::string& dir, uid_t owner);

}  // namespace ember::runtime
