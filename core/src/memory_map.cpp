// SPDX-License-Identifier: GPL-3.0-or-later
#include "memory_map.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "twell/error.hpp"

namespace twell {
namespace {

[[noreturn]] void throw_io(const std::filesystem::path& path, const char* call, int error_number) {
  throw Error(Error::Kind::Io, path.string() + ": " + call + " failed: " + std::strerror(error_number));
}

// Closes the descriptor on every path out of open(); the mapping stays valid without it.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MemoryMap MemoryMap::open(const std::filesystem::path& path) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw_io(path, "open", errno);
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) throw_io(path, "fstat", errno);
  if (!S_ISREG(info.st_mode)) throw Error(Error::Kind::Io, path.string() + ": not a regular file");
  const auto size = static_cast<std::size_t>(info.st_size);
  if (size == 0) return MemoryMap{};
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (address == MAP_FAILED) throw_io(path, "mmap", errno);
  return MemoryMap(static_cast<const std::byte*>(address), size);
}

MemoryMap::MemoryMap(MemoryMap&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0)) {}

MemoryMap& MemoryMap::operator=(MemoryMap&& other) noexcept {
  if (this != &other) {
    release();
    m_data = std::exchange(other.m_data, nullptr);
    m_size = std::exchange(other.m_size, 0);
  }
  return *this;
}

MemoryMap::~MemoryMap() {
  release();
}

void MemoryMap::release() noexcept {
  if (m_data != nullptr) ::munmap(const_cast<std::byte*>(m_data), m_size);
  m_data = nullptr;
  m_size = 0;
}

}  // namespace twell
