// File-system pieces of the code cache (cpp_compiler.cpp): checked directories, whole-file reads,
// atomic publication and an advisory lock. POSIX only.
//
// Guarantees: write_file_atomic() leaves either the old file or the complete new one at `path`,
// never a prefix, even across a crash (temporary in the same directory, fsync, rename, fsync of
// the directory). Every failure throws CacheError naming the path and the system's reason.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "support/sha256.h"

namespace ember::runtime {

// A field of a cache key's text: name, byte length, bytes. Length-prefixed, so no two different
// field lists produce the same text.
void add_key_field(Sha256& h, std::string_view name, std::string_view value);

// ensure_cache_dir (cpp_compiler.h): creates `dir` 0700 and checks owner and write permissions.
void ensure_private_dir(const std::string& dir, uid_t owner);

// The whole file, or nullopt if it does not exist.
std::optional<std::string> read_file_if_exists(const std::string& path);

void write_file_atomic(const std::string& path, std::string_view bytes);

// Makes a file written by another program (the compiler) durable and moves it into place.
void publish_file(const std::string& temp_path, const std::string& path);

// rename(2) that ignores a missing source.
void rename_if_exists(const std::string& from, const std::string& to);
void remove_if_exists(const std::string& path);

// A unique name in the directory of `path` for a temporary that will be renamed onto it:
// `<path>.tmp.<pid>.<n>`.
std::string temp_path_for(const std::string& path);
// Removes the temporaries of `path` (temp_path_for's names) whose process is gone: a process that
// exited or was killed while its compiler wrote one (a precompiled header built in the background
// when the process exits) left it. Call it holding `path`'s lock, before building `path` again.
void remove_stale_temporaries(const std::string& path);

// flock(LOCK_EX) on `path` (created 0600) for the lifetime of the object. Blocks while another
// process or another open of the file holds it; the kernel releases it if the holder dies.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace ember::runtime
