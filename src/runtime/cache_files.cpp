// POSIX file handling for the code cache. Errors carry strerror(errno) and the path, because a
// cache failure is usually the environment (permissions, a full disk) and the user must find it.
#include "runtime/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpp_compiler.h"

namespace ember::runtime {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw CacheError("Ember code cache: " + what + " '" + path + "': " + std::strerror(err));
}

std::string parent_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void make_parents(const std::string& dir) {
  std::string parent = parent_of(dir);
  if (parent == dir || parent == "/" || parent == ".") return;
  struct stat st;
  if (stat(parent.c_str(), &st) == 0) return;
  make_parents(parent);
  // The parents are ordinary directories (~/.cache): the default mode, as mkdir -p makes them.
  if (mkdir(parent.c_str(), 0777) != 0 && errno != EEXIST) fail("cannot create directory", parent, errno);
}

void fsync_dir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory", dir, errno);
  // Some file systems refuse fsync on a directory (EINVAL); the rename is still atomic there.
  if (fsync(fd) != 0 && errno != EINVAL) {
    int err = errno;
    close(fd);
    fail("cannot fsync directory", dir, err);
  }
  close(fd);
}

void fsync_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path, errno);
  if (fsync(fd) != 0) {
    int err = errno;
    close(fd);
    fail("cannot fsync", path, err);
  }
  close(fd);
}

}  // namespace

void add_key_field(Sha256& h, std::string_view name, std::string_view value) {
  std::string head = std::string(name) + " " + std::to_string(value.size()) + "\n";
  h.update(head);
  h.update(value);
  h.update("\n");
}

void ensure_private_dir(const std::string& dir, uid_t owner) {
  if (dir.empty()) throw CacheError("Ember code cache: the cache directory path is empty (EMBER_CACHE_DIR)");
  make_parents(dir);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create directory", dir, errno);
  struct stat link_st, st;
  if (lstat(dir.c_str(), &link_st) != 0) fail("cannot stat", dir, errno);
  if (stat(dir.c_str(), &st) != 0) fail("cannot stat", dir, errno);
  std::string shown = S_ISLNK(link_st.st_mode) ? "'" + dir + "' (a symlink)" : "'" + dir + "'";
  if (!S_ISDIR(st.st_mode)) {
    throw CacheError("Ember code cache: " + shown + " is not a directory; remove it or set EMBER_CACHE_DIR elsewhere");
  }
  if (st.st_uid != owner) {
    throw CacheError("Ember code cache: " + shown + " is owned by uid " + std::to_string(st.st_uid) +
                     ", not by this user (uid " + std::to_string(owner) +
                     "); another user could plant code there. Use a directory you own: set EMBER_CACHE_DIR");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    throw CacheError("Ember code cache: " + shown + " is writable by group or others (mode " + mode +
                     "); another user could plant code there. Fix: chmod 700 '" + dir + "'");
  }
}

std::optional<std::string> read_file_if_exists(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot open", path, errno);
  }
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      fail("cannot read", path, err);
    }
    if (n == 0) break;
    bytes.append(buffer, size_t(n));
  }
  close(fd);
  return bytes;
}

std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
}

void remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string prefix = path.substr(slash == std::string::npos ? 0 : slash + 1) + ".tmp.";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;  // nothing to sweep; building reports a real problem with the directory
  std::vector<std::string> stale;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    // kill(pid, 0) fails with ESRCH once no process has that id (a live one, or one of another user's: kept).
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(dir + "/" + name);
  }
  closedir(d);
  for (const std::string& file : stale) remove_if_exists(file);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  std::string temp = temp_path_for(path);
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", temp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      unlink(temp.c_str());
      fail("cannot write", temp, err);
    }
    done += size_t(n);
  }
  if (fsync(fd) != 0) {
    int err = errno;
    close(fd);
    unlink(temp.c_str());
    fail("cannot fsync", temp, err);
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(temp.c_str());
    fail("cannot rename a temporary onto", path, err);
  }
  fsync_dir(parent_of(path));
}

void publish_file(const std::string& temp_path, const std::string& path) {
  fsync_file(temp_path);
  if (rename(temp_path.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(temp_path.c_str());
    fail("cannot rename a temporary onto", path, err);
  }
  fsync_dir(parent_of(path));
}

void rename_if_exists(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) fail("cannot rename", from, errno);
}

void remove_if_exists(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) fail("cannot remove", path, errno);
}

FileLock::FileLock(const std::string& path) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("cannot open lock file", path, errno);
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    close(fd_);
    fail("cannot lock", path, err);
  }
}

FileLock::~FileLock() { close(fd_); }  // closing the last descriptor releases the flock

}  // namespace ember::runtime
