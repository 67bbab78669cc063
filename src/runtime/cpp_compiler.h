// The C++ compiler driver and disk code cache: generated C++ source in, a loaded shared object out.
//
// Needs: a g++-compatible compiler (options.compiler: one program, found on PATH or by path) and a
// cache directory owned by this user (options.cache_dir; Python resolves EMBER_CACHE_DIR).
// Guarantees:
//  - An artifact is named by cache_key(): sha256 over the source, every compiler flag, the
//    compiler's `--version` line, the ISA and the bytes of every file under the include dirs, so
//    any change to what the compiler sees is a different key.
//  - Layout: <cache_dir>/cpp/<key[0:2]>/<key>.{so,sha256,cpp,lock}; kernel index entries
//    <cache_dir>/kernels/<key[0:2]>/<key>.unit (compile_split). Files appear only by
//    rename(2) of a fsync()ed temporary in the same directory, the digest sidecar before the .so,
//    so no process ever reads half a file. An entry whose .so does not match its digest (or does
//    not dlopen) is rebuilt.
//  - Compile-and-publish holds flock(<key>.lock): processes sharing a cache compile a key once;
//    loading an entry that is already published takes no lock.
//  - The cache directory is created 0700 and refused (CacheError) unless it is owned by this user
//    and not writable by group or others, following a symlink to check the real directory.
//  - A precompiled header, if asked for, is itself an entry <cache_dir>/pch/<key>/<header>.gch
//    with the same publication, digest and lock rules, checked once per CodeCache.
//  - Libraries are memoized in-process by key, weakly: a library is dlclosed when the last
//    LoadedLibrary reference goes (its compiled graphs are gone), so a long process that compiles
//    and drops graphs keeps only the libraries in use mapped (each takes about five memory maps of
//    the 65,530 a process may have: ~13,000 libraries were the end before). A library whose kernel
//    made a thread_local scratch array (runtime.h, symbolic extents) stays mapped until that thread
//    exits (glibc keeps a library with live thread_local destructors).
//
// State, and who owns it. None of it is configuration (every setting arrives in CppCompileOptions);
// each piece is a memo keyed by everything that determines its value, guarded by its own mutex.
//  - A CodeCache (the compile context, passed explicitly: Compiler -> build_runner ->
//    compile_to_kernels -> compile_graph -> CodeCache::compile_and_load) owns the memos whose
//    lifetime is a choice: a file's sha256 under the include dirs, by path, reused only while its
//    inode, size and times match (a changed header is rehashed); the compiler's `--version` line, by
//    compiler path (a compiler replaced in place is not noticed while the context lives: the
//    documented cost of not spawning it per compile); precompiled headers verified on disk, by PCH
//    key; background PCH builds started, by (cache dir, compiler, header). A fresh context reads
//    all of them again, so tests get isolation; the driver shares one context per (cache dir,
//    compiler) among the Compilers of a process (driver/compiler.h), which is what a process-wide
//    memo gave.
//  - The background PCH thread is detached and holds a shared_ptr to the context's memos (not to
//    the CodeCache): destroying a context never waits for a PCH build (a Compiler may be destroyed
//    by Python's garbage collector, holding the GIL), and the thread never touches freed memory.
//    The build itself is published under its file lock like any entry, so a process that exits
//    meanwhile leaves at worst a stray temporary file.
//  - Loaded libraries, by cache key, are process-wide (with the per-key compile mutexes): a
//    dlopen()ed library is a process resource, compiled graphs of every Compiler hold code pointers
//    into it, and two contexts compiling the same source must share one load while either holds it.
//    The memo outlives every context: find_loaded() reads it.
//
// Python-free, so it can move into the core library.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
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
  // without it (the first compile in a context never waits for the PCH), instead of building it
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

// The compile context: the memos of one user of the cache (see the file comment). Thread-safe:
// one context may serve concurrent compiles. Share a context through a shared_ptr, not a copy.
class CodeCache {
 public:
  CodeCache();  // empty memos
  CodeCache(const CodeCache&) = delete;
  CodeCache& operator=(const CodeCache&) = delete;

  // Compiles `source` to a shared object through the disk cache and loads it; memoized in memory
  // by key across contexts (a second call with the same key returns the same LoadedLibrary
  // without touching the disk). Concurrent calls for one key compile it once. Throws
  // CompileError / CacheError.
  CompileResult compile_and_load(const std::string& source, const CppCompileOptions& options);

  // Hex sha256 naming the artifact (see the file comment). Runs `<compiler> --version` once per
  // compiler string and context. Throws CompileError if the compiler cannot run, CacheError if an
  // include dir cannot be read.
  std::string cache_key(const std::string& source, const CppCompileOptions& options);

  // The published library of `key` (loaded in this process, or on disk with a matching digest and
  // loading); nullptr otherwise. Never compiles. Throws CacheError if the cache dir is unsafe.
  std::shared_ptr<LoadedLibrary> load_by_key(const std::string& key, const CppCompileOptions& options);

  // The first line of `<compiler> --version`, memoized per compiler string in this context.
  std::string compiler_version(const std::string& compiler);

  struct State;  // the memos; shared with background PCH builds (cpp_compiler.cpp)

 private:
  std::shared_ptr<State> state_;
};

// One graph's code in pieces (codegen::CppSource): functions, each an extern "C" symbol (its
// kernels and its entry), and the text every unit of functions starts with (the includes).
struct SplitSource {
  std::string prelude;
  std::vector<std::pair<std::string, std::string>> functions;  // symbol, definition (distinct symbols)
};

struct SplitBuild {
  std::vector<void*> addresses;                            // per function, in SplitSource order
  std::vector<std::shared_ptr<LoadedLibrary>> libraries;   // per function: the library defining it
  std::vector<bool> reused;  // per function: found compiled (by an earlier graph, run or process)
  int units = 0;             // units this call compiled (each one compiler process)
  bool cache_hit = false;    // nothing was compiled
  double seconds = 0;        // wall time of the call
};

// Builds a SplitSource through the cache (docs/code-cache.md, "Kernels across graphs"). Each
// function has its own key: cache_key(prelude + definition), the same rules as any source. A
// function whose key is indexed (<cache_dir>/kernels/<key[0:2]>/<key>.unit names the unit that
// holds it) and whose unit loads with a matching digest and defines its symbol is reused; the others
// are split into min(jobs, count) units of about equal size (prelude + their definitions), compiled
// as ordinary entries (compile_and_load) by that many concurrent compiler processes, and indexed.
// With jobs 1 and nothing reused, the one unit is the graph's whole source. An index entry that is
// malformed, or names a unit that is gone, corrupt or lacks the symbol, is a miss: the function is
// compiled again and the index entry replaced (atomically). `jobs` < 1 (the driver's) means as many
// units as pay off, up to one per core this process may run on (sched_getaffinity, like
// os.sched_getaffinity): one per kMinUnitBytes of definitions to compile, at least one. Throws
// CompileError / CacheError (the first a compile raised, after every compile has finished).
SplitBuild compile_split(CodeCache& cache, const SplitSource& source, const CppCompileOptions& options, int jobs);

// The definition text a unit of its own must have under automatic jobs. A unit's compiler process
// costs about 0.11 s however little it defines (start, the 39 MB precompiled header, the prelude's
// other headers, the link: a unit holding only an entry of a few lines took 0.12 s; g++ 12, -O3,
// AVX-512), about what 20 KB of kernels take to compile: a graph with less compiles in one process
// in the same wall time as two, with half the CPU (a fuzz program's kernel and entry: 0.25 -> 0.14 s).
constexpr size_t kMinUnitBytes = 16384;

// The library a compile_and_load of this key loaded in this process (through any context) while
// something still holds it, or nullptr.
std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key);
// How many libraries are loaded in this process (held by something).
size_t loaded_library_count();

// Creates `dir` (parents as mkdir -p, `dir` itself 0700) and checks it: it must be a directory
// (after following symlinks) owned by `owner` and not writable by group or others. Throws
// CacheError naming the path, the problem and the fix. compile_and_load uses geteuid().
void ensure_cache_dir(const std::string& dir, uid_t owner);

}  // namespace ember::runtime
