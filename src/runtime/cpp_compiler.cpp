// The compiler driver and disk code cache (contract in cpp_compiler.h).
//
// One CodeCache::compile_and_load call, in order:
//   key -> in-process memo -> (per-key mutex) -> check the cache dir -> load the published entry if
//   its digest matches, without a lock -> else flock(<key>.lock), look again (another process may
//   have published it meanwhile), get the precompiled header if one is asked for (its own entry,
//   own lock, taken after the entry lock and never before it), compile to a temporary, write the
//   .sha256 sidecar, rename the .so into place, dlopen.
// The sidecar is written before the .so appears, so any reader that sees a .so also sees a digest;
// a reader that sees a stale pair (mid-rebuild) finds a mismatch and waits on the lock.
#include "runtime/cpp_compiler.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "runtime/cache_files.h"
#include "runtime/subprocess.h"
#include "support/sha256.h"

namespace ember::runtime {

// The memos of one CodeCache, each under its own mutex (the two PCH sets share one); a background
// PCH build holds a shared_ptr to them (cpp_compiler.h says why).
struct CodeCache::State {
  struct FileState {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns, ctime_ns;
    std::string digest;
  };
  std::mutex files_mutex;
  std::map<std::string, FileState> files;  // path -> digest, while the file's stat matches

  std::mutex versions_mutex;
  std::map<std::string, std::string> versions;  // compiler -> first line of --version

  std::mutex pch_mutex;
  std::map<std::string, std::string> pch_checked;  // PCH key -> directory, verified in this context
  std::set<std::string> pch_started;               // (cache dir, compiler, header) built in background
};

using State = CodeCache::State;

namespace {

// Bumped when the layout or the key recipe changes, so old entries are never misread.
constexpr const char* kCacheFormat = "ember-cpp-cache-1";

// The first line of `<compiler> --version`, memoized in `state`.
std::string compiler_version(State& state, const std::string& compiler) {
  {
    std::lock_guard<std::mutex> lock(state.versions_mutex);
    auto found = state.versions.find(compiler);
    if (found != state.versions.end()) return found->second;
  }
  if (compiler.empty()) throw CompileError("Ember: no C++ compiler given (set CXX or install g++)", "", "", "");
  std::vector<std::string> argv{compiler, "--version"};
  ProcessResult run = run_process(argv);
  std::string first_line = run.output.substr(0, run.output.find('\n'));
  if (!run.started || run.exit_status != 0 || first_line.empty()) {
    throw CompileError("Ember: cannot run the C++ compiler '" + compiler + "' (set CXX to a working g++):\n" +
                           run.output,
                       shell_quote(argv), run.output, "");
  }
  std::lock_guard<std::mutex> lock(state.versions_mutex);
  state.versions.emplace(compiler, first_line);
  return first_line;
}

// Digest of every regular file under `dir` (relative path and bytes, in path order). Each file's
// digest is reused while its inode, size and times are unchanged.
std::string include_dir_digest(State& state, const std::string& dir) {
  namespace fs = std::filesystem;

  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw CacheError("Ember code cache: include directory '" + dir + "' does not exist or is not a directory");
  }
  std::vector<std::pair<std::string, std::string>> files;  // relative path, absolute path
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    files.emplace_back(fs::relative(it->path(), dir, ec).generic_string(), it->path().string());
  }
  if (ec) throw CacheError("Ember code cache: cannot list include directory '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());

  Sha256 h;
  for (const auto& [relative, path] : files) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw CacheError("Ember code cache: cannot stat header '" + path + "'");
    int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    int64_t ctime_ns = int64_t(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
    std::string digest;
    {
      std::lock_guard<std::mutex> lock(state.files_mutex);
      auto found = state.files.find(path);
      if (found != state.files.end() && found->second.dev == st.st_dev && found->second.ino == st.st_ino &&
          found->second.size == st.st_size && found->second.mtime_ns == mtime_ns &&
          found->second.ctime_ns == ctime_ns) {
        digest = found->second.digest;
      }
    }
    if (digest.empty()) {
      std::optional<std::string> bytes = read_file_if_exists(path);
      if (!bytes) throw CacheError("Ember code cache: header '" + path + "' vanished while being hashed");
      digest = sha256_hex(*bytes);
      std::lock_guard<std::mutex> lock(state.files_mutex);
      state.files[path] = State::FileState{st.st_dev, st.st_ino, st.st_size, mtime_ns, ctime_ns, digest};
    }
    add_key_field(h, "header", relative);
    add_key_field(h, "header-sha256", digest);
  }
  return Sha256::hex(h.finish());
}

struct EntryPaths {
  std::string dir, so, digest, source, failed_source, lock;
};

EntryPaths entry_paths(const std::string& cache_dir, const std::string& key) {
  EntryPaths p;
  p.dir = cache_dir + "/cpp/" + key.substr(0, 2);
  std::string stem = p.dir + "/" + key;
  p.so = stem + ".so";
  p.digest = stem + ".sha256";
  p.source = stem + ".cpp";
  p.failed_source = stem + ".failed.cpp";
  p.lock = stem + ".lock";
  return p;
}

bool matches_digest(const std::string& path, const std::string& digest_path) {
  std::optional<std::string> expected = read_file_if_exists(digest_path);
  if (!expected) return false;
  std::optional<std::string> bytes = read_file_if_exists(path);
  return bytes && sha256_hex(*bytes) == *expected;
}

// The published library if its bytes match the sidecar digest and it loads; nullptr otherwise.
std::shared_ptr<LoadedLibrary> load_published(const EntryPaths& p, const std::string& key) {
  if (!matches_digest(p.so, p.digest)) return nullptr;
  try {
    return LoadedLibrary::open(p.so, key);
  } catch (const std::runtime_error&) {
    return nullptr;  // a file that matches its digest but does not load is rebuilt once
  }
}

// The include directory holding <header>.gch for these options ("" when there is none), built
// under its own lock on first use. Its key covers everything GCC checks before using a PCH.
// With `only_if_ready`, returns "" instead of building when no valid PCH is published.
std::string precompiled_header_dir(State& state, const CppCompileOptions& options, uid_t owner,
                                   bool only_if_ready = false) {
  const std::string& header = options.precompiled_header;
  if (header.empty()) return "";
  std::vector<std::string> flags;
  for (const std::string& flag : compile_flags(options)) {
    if (flag != "-shared") flags.push_back(flag);  // a link option; GCC rejects it with -x c++-header
  }
  Sha256 h;
  add_key_field(h, "format", kCacheFormat);
  add_key_field(h, "kind", "pch");
  add_key_field(h, "compiler-version", compiler_version(state, options.compiler));
  add_key_field(h, "isa", isa_name(options.isa));
  for (const std::string& flag : flags) add_key_field(h, "flag", flag);
  for (const std::string& dir : options.include_dirs) {
    add_key_field(h, "include-dir-sha256", include_dir_digest(state, dir));
  }
  add_key_field(h, "header", header);
  std::string key = Sha256::hex(h.finish());

  {
    std::lock_guard<std::mutex> lock(state.pch_mutex);
    auto found = state.pch_checked.find(key);
    if (found != state.pch_checked.end()) return found->second;
  }
  std::string header_path;
  for (const std::string& dir : options.include_dirs) {
    struct stat st;
    if (stat((dir + "/" + header).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      header_path = dir + "/" + header;
      break;
    }
  }
  if (header_path.empty()) {
    throw CacheError("Ember code cache: precompiled header '" + header + "' is not in any include directory");
  }
  std::string root = options.cache_dir + "/pch";
  ensure_private_dir(root, owner);
  std::string dir = root + "/" + key;
  std::string gch = dir + "/" + header + ".gch";
  std::string digest = dir + ".sha256";
  auto remember = [&](std::string result) {
    std::lock_guard<std::mutex> lock(state.pch_mutex);
    state.pch_checked.emplace(key, result);
    return result;
  };
  if (matches_digest(gch, digest)) return remember(dir);
  if (only_if_ready) return "";
  FileLock file_lock(dir + ".lock");
  if (matches_digest(gch, digest)) return remember(dir);
  remove_if_exists(digest);
  ensure_private_dir(dir, owner);
  // The header's own folders (ember/) under the PCH directory, where GCC will look for it.
  for (size_t slash = 0; (slash = header.find('/', slash + 1)) != std::string::npos;) {
    ensure_private_dir(dir + "/" + header.substr(0, slash), owner);
  }
  remove_stale_temporaries(gch);
  std::string temp = temp_path_for(gch);
  std::vector<std::string> argv{options.compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-x", "c++-header", header_path, "-o", temp});
  ProcessResult run = run_process(argv);
  std::optional<std::string> bytes;
  if (run.started && run.exit_status == 0) bytes = read_file_if_exists(temp);
  if (!bytes) {
    remove_if_exists(temp);
    return remember("");  // the main compile reports a broken header with the real error
  }
  write_file_atomic(digest, sha256_hex(*bytes));
  publish_file(temp, gch);
  return remember(dir);
}

// Starts one detached thread per context and PCH that builds it. The thread owns a reference to
// the memos it updates, so the context may be destroyed while it runs (cpp_compiler.h). It runs
// at the lowest CPU priority (on Linux a thread's nice value is its own, and the compiler it
// spawns inherits it): the build only speeds up later compiles, so it must not slow the ones a
// call waits on (a cold start on two cores ran it beside both of a graph's units: 0.5 s a unit
// became 0.75 s).
void build_precompiled_header_in_background(const std::shared_ptr<State>& state, const CppCompileOptions& options,
                                            uid_t owner) {
  {
    std::lock_guard<std::mutex> lock(state->pch_mutex);
    std::string id = options.cache_dir + "\n" + options.compiler + "\n" + options.precompiled_header;
    if (!state->pch_started.insert(id).second) return;
  }
  std::thread([state, options, owner] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);  // best effort: the build works without
    try {
      precompiled_header_dir(*state, options, owner);
    } catch (const std::exception&) {
      // Only a speed-up: the next process tries again, and compiles work without it.
    }
  }).detach();
}

// Runs the compiler on the entry's source; the caller holds the entry lock.
std::shared_ptr<LoadedLibrary> build_entry(const EntryPaths& p, const std::string& key, const std::string& source,
                                           const CppCompileOptions& options, const std::string& pch_dir) {
  // Stale pieces of an invalid entry go first, so nothing can pair them with the new build.
  remove_if_exists(p.so);
  remove_if_exists(p.digest);
  write_file_atomic(p.source, source);
  remove_stale_temporaries(p.so);

  std::string temp_so = temp_path_for(p.so);
  std::vector<std::string> argv{options.compiler};
  // The PCH directory is searched before the real header's (it holds only the .gch).
  if (!pch_dir.empty()) argv.push_back("-I" + pch_dir);
  for (std::string& flag : compile_flags(options)) argv.push_back(std::move(flag));
  argv.insert(argv.end(), {p.source, "-o", temp_so});
  ProcessResult run = run_process(argv);
  if (!run.started || run.exit_status != 0) {
    remove_if_exists(temp_so);
    rename_if_exists(p.source, p.failed_source);
    std::string command = shell_quote(argv);
    std::string status = run.started ? "exited with status " + std::to_string(run.exit_status) : "could not start";
    throw CompileError("Ember: the C++ compiler " + status + "\ncommand: " + command + "\n" + run.output +
                           (run.output.empty() || run.output.back() == '\n' ? "" : "\n") +
                           "the source is kept at " + p.failed_source,
                       command, run.output, p.failed_source);
  }
  std::optional<std::string> bytes = read_file_if_exists(temp_so);
  if (!bytes) throw CacheError("Ember code cache: the compiler reported success but wrote no '" + temp_so + "'");
  write_file_atomic(p.digest, sha256_hex(*bytes));
  publish_file(temp_so, p.so);
  try {
    return LoadedLibrary::open(p.so, key);
  } catch (const std::runtime_error& e) {
    throw CompileError(std::string("Ember: the compiled library does not load: ") + e.what(), shell_quote(argv),
                       e.what(), p.source);
  }
}

// The process-wide part (cpp_compiler.h says why): loaded libraries by key, across contexts, held
// weakly: a library stays loaded while a compiled graph (or any caller) holds it, and is dlclosed
// after the last one goes.
struct Memo {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<LoadedLibrary>> libraries;
  size_t swept_size = 0;                                           // libraries.size() after the last sweep
  std::map<std::string, std::shared_ptr<std::mutex>> key_mutexes;  // one compile per key at a time

  // The live library of `key`, or nullptr. Caller holds `mutex`.
  std::shared_ptr<LoadedLibrary> live(const std::string& key) {
    auto found = libraries.find(key);
    return found == libraries.end() ? nullptr : found->second.lock();
  }
  // Remembers `library` under `key` unless a live one is there already (a concurrent load: one
  // mapping wins); returns the one to use. Entries of unloaded libraries are swept whenever the map
  // has doubled since the last sweep, so it stays within twice the live count. Caller holds `mutex`
  // and keeps its own reference to `library`, so a losing duplicate is dlclosed after the lock.
  std::shared_ptr<LoadedLibrary> remember(const std::string& key, const std::shared_ptr<LoadedLibrary>& library) {
    if (auto existing = live(key)) return existing;
    libraries[key] = library;
    if (libraries.size() > 2 * swept_size + 64) {
      for (auto it = libraries.begin(); it != libraries.end();) it = it->second.expired() ? libraries.erase(it) : ++it;
      swept_size = libraries.size();
    }
    return library;
  }
};

Memo& memo() {
  static Memo* m = new Memo();  // never destroyed: a library dropped during exit may still look itself up
  return *m;
}

}  // namespace

CompileError::CompileError(const std::string& message, std::string command_line_, std::string compiler_output_,
                           std::string source_path_)
    : std::runtime_error(message),
      command_line(std::move(command_line_)),
      compiler_output(std::move(compiler_output_)),
      source_path(std::move(source_path_)) {}

std::vector<std::string> compile_flags(const CppCompileOptions& options) {
  std::vector<std::string> flags{
      "-O3", "-std=c++17", "-fPIC", "-shared",
      "-pipe",              // no temporary files between the compiler stages
      "-ffp-contract=off",  // no implicit FMA: kernels round like eager, bit for bit
      // errno is never read by generated code; dropping it lets sqrt and friends inline and
      // changes no result (every value stays IEEE-exact; only errno writes disappear).
      "-fno-math-errno", "-DNDEBUG"};
  if (options.openmp) flags.push_back("-fopenmp");
  switch (options.isa) {
    case Isa::Scalar:
      break;
    case Isa::Avx2:
      flags.insert(flags.end(), {"-mavx2", "-mfma", "-mf16c", "-DEMBER_ISA_AVX2"});
      break;
    case Isa::Avx512:
      flags.insert(flags.end(), {"-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma", "-mf16c",
                                 "-DEMBER_ISA_AVX512"});
      break;
  }
  for (const std::string& dir : options.include_dirs) flags.push_back("-I" + dir);
  return flags;
}

std::string CodeCache::compiler_version(const std::string& compiler) {
  return runtime::compiler_version(*state_, compiler);
}

CodeCache::CodeCache() : state_(std::make_shared<State>()) {}

std::string CodeCache::cache_key(const std::string& source, const CppCompileOptions& options) {
  Sha256 h;
  add_key_field(h, "format", kCacheFormat);
  add_key_field(h, "compiler-version", runtime::compiler_version(*state_, options.compiler));
  add_key_field(h, "isa", isa_name(options.isa));
  for (const std::string& flag : compile_flags(options)) add_key_field(h, "flag", flag);
  for (const std::string& dir : options.include_dirs) {
    add_key_field(h, "include-dir-sha256", include_dir_digest(*state_, dir));
  }
  add_key_field(h, "precompiled-header", options.precompiled_header);
  add_key_field(h, "source", source);
  return Sha256::hex(h.finish());
}

void ensure_cache_dir(const std::string& dir, uid_t owner) { ensure_private_dir(dir, owner); }

CompileResult CodeCache::compile_and_load(const std::string& source, const CppCompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::string key = cache_key(source, options);

  Memo& m = memo();
  std::shared_ptr<std::mutex> key_mutex;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (auto library = m.live(key)) return {std::move(library), true, elapsed()};
    auto& slot = m.key_mutexes[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    key_mutex = slot;
  }
  std::lock_guard<std::mutex> key_lock(*key_mutex);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (auto library = m.live(key)) return {std::move(library), true, elapsed()};
  }
  auto remember = [&](const std::shared_ptr<LoadedLibrary>& library, bool hit) {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.key_mutexes.erase(key);
    return CompileResult{m.remember(key, library), hit, elapsed()};
  };

  uid_t owner = geteuid();
  ensure_private_dir(options.cache_dir, owner);
  ensure_private_dir(options.cache_dir + "/cpp", owner);
  EntryPaths paths = entry_paths(options.cache_dir, key);
  ensure_private_dir(paths.dir, owner);

  if (auto library = load_published(paths, key)) return remember(library, true);
  FileLock file_lock(paths.lock);
  if (auto library = load_published(paths, key)) return remember(library, true);
  std::string pch_dir;
  if (options.precompiled_header_in_background && !options.precompiled_header.empty()) {
    pch_dir = precompiled_header_dir(*state_, options, owner, /*only_if_ready=*/true);
    if (pch_dir.empty()) build_precompiled_header_in_background(state_, options, owner);
  } else {
    pch_dir = precompiled_header_dir(*state_, options, owner);
  }
  return remember(build_entry(paths, key, source, options, pch_dir), false);
}

std::shared_ptr<LoadedLibrary> CodeCache::load_by_key(const std::string& key, const CppCompileOptions& options) {
  if (auto library = find_loaded(key)) return library;
  const uid_t owner = geteuid();
  ensure_private_dir(options.cache_dir, owner);
  ensure_private_dir(options.cache_dir + "/cpp", owner);
  const EntryPaths paths = entry_paths(options.cache_dir, key);
  ensure_private_dir(paths.dir, owner);
  std::shared_ptr<LoadedLibrary> library = load_published(paths, key);
  if (!library) return nullptr;
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.remember(key, library);
}

namespace {

bool is_cache_key(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Where the index entry of a kernel key is, its folder created (checked 0700).
std::string kernel_index_path(const std::string& cache_dir, const std::string& kernel_key) {
  const uid_t owner = geteuid();
  ensure_private_dir(cache_dir, owner);
  ensure_private_dir(cache_dir + "/kernels", owner);
  const std::string dir = cache_dir + "/kernels/" + kernel_key.substr(0, 2);
  ensure_private_dir(dir, owner);
  return dir + "/" + kernel_key + ".unit";
}

// Indices 0..weights.size()-1 split into `count` groups of about equal total weight (heaviest first
// onto the lightest group), each group in increasing index order: deterministic, so processes that
// compile the same graph at once form the same units and the units' file locks make one compile.
std::vector<std::vector<size_t>> balanced_groups(const std::vector<size_t>& weights, size_t count) {
  std::vector<size_t> order(weights.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  std::vector<std::vector<size_t>> groups(count);
  std::vector<size_t> load(count, 0);
  for (size_t i : order) {
    const size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    groups[g].push_back(i);
    load[g] += weights[i];
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

}  // namespace

SplitBuild compile_split(CodeCache& cache, const SplitSource& source, const CppCompileOptions& options, int jobs) {
  const auto start = std::chrono::steady_clock::now();
  const bool automatic = jobs < 1;
  if (automatic) {
    cpu_set_t cpus;
    jobs = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  }
  const size_t n = source.functions.size();
  SplitBuild build;
  build.addresses.assign(n, nullptr);
  build.libraries.resize(n);
  build.reused.assign(n, true);
  std::vector<std::string> keys(n);
  std::vector<size_t> missing;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = cache.cache_key(source.prelude + source.functions[i].second, options);
    const std::optional<std::string> unit = read_file_if_exists(kernel_index_path(options.cache_dir, keys[i]));
    std::shared_ptr<LoadedLibrary>& library = build.libraries[i];
    if (unit && is_cache_key(*unit)) library = cache.load_by_key(*unit, options);
    if (library) {
      try {
        build.addresses[i] = library->symbol(source.functions[i].first.c_str());
      } catch (const std::runtime_error&) {
        library = nullptr;  // the index names a unit without this function: compile it again
      }
    }
    if (!library) missing.push_back(i);
  }

  // The units: each one compile_and_load, `jobs` at a time.
  std::vector<size_t> weights;
  for (size_t i : missing) weights.push_back(source.functions[i].second.size());
  size_t unit_count = std::min(missing.size(), static_cast<size_t>(jobs));
  if (automatic && unit_count > 1) {
    const size_t text = std::accumulate(weights.begin(), weights.end(), size_t{0});
    unit_count = std::max<size_t>(1, std::min(unit_count, text / kMinUnitBytes));
  }
  std::vector<std::vector<size_t>> groups = balanced_groups(weights, unit_count);
  std::vector<CompileResult> results(groups.size());
  std::vector<std::exception_ptr> errors(groups.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t u; (u = next++) < groups.size();) {
      std::string text = source.prelude;
      for (size_t g : groups[u]) text += source.functions[missing[g]].second + "\n";
      try {
        results[u] = cache.compile_and_load(text, options);
      } catch (...) {
        errors[u] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < groups.size(); ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);

  build.cache_hit = true;
  for (size_t u = 0; u < groups.size(); ++u) {
    // A unit found published (another process compiled it, or its index entries were lost) is a reuse.
    build.cache_hit = build.cache_hit && results[u].cache_hit;
    build.units += results[u].cache_hit ? 0 : 1;
    for (size_t g : groups[u]) {
      const size_t i = missing[g];
      build.libraries[i] = results[u].library;
      build.addresses[i] = results[u].library->symbol(source.functions[i].first.c_str());
      build.reused[i] = results[u].cache_hit;
      write_file_atomic(kernel_index_path(options.cache_dir, keys[i]), results[u].library->key());
    }
  }
  build.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return build;
}

std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.live(key);
}

size_t loaded_library_count() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  return static_cast<size_t>(
      std::count_if(m.libraries.begin(), m.libraries.end(), [](const auto& entry) { return !entry.second.expired(); }));
}

// ---- LoadedLibrary ----

std::shared_ptr<LoadedLibrary> LoadedLibrary::open(const std::string& path, const std::string& key) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    throw std::runtime_error("cannot load '" + path + "': " + (error ? error : "unknown dlopen error"));
  }
  return std::shared_ptr<LoadedLibrary>(new LoadedLibrary(handle, path, key));
}

LoadedLibrary::LoadedLibrary(void* handle, std::string path, std::string key)
    : handle_(handle), path_(std::move(path)), key_(std::move(key)) {}

LoadedLibrary::~LoadedLibrary() { dlclose(handle_); }

void* LoadedLibrary::symbol(const char* name) const {
  dlerror();
  void* address = dlsym(handle_, name);
  if (!address) {
    throw std::runtime_error(std::string("symbol '") + name + "' is not defined in '" + path_ + "'");
  }
  return address;
}

}  // namespace ember::runtime
