// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "twell/error.hpp"

namespace twell {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int error_number) {
  throw Error(Error::Kind::Io,
              "cannot write " + path.string() + ": " + what + ": " + std::strerror(error_number));
}

/// Closes a descriptor on scope exit unless released.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : m_fd(fd) {}
  ~FileDescriptor() {
    if (m_fd >= 0) ::close(m_fd);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return m_fd; }
  /// Closes now, reporting the error close() returns (a deferred write error on some file systems).
  int close_checked() {
    const int result = ::close(m_fd);
    m_fd = -1;
    return result;
  }

 private:
  int m_fd;
};

/// Removes the temporary file unless the rename consumed it.
class TemporaryFileGuard {
 public:
  explicit TemporaryFileGuard(std::filesystem::path path) : m_path(std::move(path)) {}
  ~TemporaryFileGuard() {
    if (!m_path.empty()) ::unlink(m_path.c_str());
  }
  TemporaryFileGuard(const TemporaryFileGuard&) = delete;
  TemporaryFileGuard& operator=(const TemporaryFileGuard&) = delete;
  void release() { m_path.clear(); }

 private:
  std::filesystem::path m_path;
};

std::filesystem::path temporary_sibling(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  std::string name(1, '.');  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "." + string
  name += target.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  return target.parent_path() / name;
}

void write_all(int fd, std::string_view bytes, const std::filesystem::path& temporary) {
  const char* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(temporary, "write", errno);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  if (path.filename().empty())
    throw Error(Error::Kind::InvalidInput, "cannot write '" + path.string() + "': not a file name");
  const std::filesystem::path directory =
      path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  const std::filesystem::path temporary = temporary_sibling(path);

  mode_t mode = 0666;  // narrowed by the umask, as for any new file
  struct stat existing {};
  const bool replacing = ::stat(path.c_str(), &existing) == 0;
  if (replacing) mode = existing.st_mode & 07777;

  FileDescriptor file(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (file.get() < 0) {
    const int error_number = errno;
    fail(path, ("create temporary file " + temporary.string()).c_str(), error_number);
  }
  TemporaryFileGuard guard(temporary);
  if (replacing && ::fchmod(file.get(), mode) != 0) fail(temporary, "fchmod", errno);
  write_all(file.get(), bytes, temporary);
  if (::fsync(file.get()) != 0) fail(temporary, "fsync", errno);
  if (file.close_checked() != 0) fail(temporary, "close", errno);
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail(path, "rename", errno);
  guard.release();

  // The rename is durable only once the directory entry is on disk; failing to sync a directory
  // (some file systems refuse) does not undo the write, so it is not an error.
  FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

}  // namespace twell
