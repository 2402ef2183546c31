// SPDX-License-Identifier: GPL-3.0-or-later
// A read-only private memory map of a whole file: what lets a multi-GB checkpoint open in
// milliseconds (only the pages actually read are ever loaded).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace twell {

class MemoryMap {
 public:
  /// Maps `path` with PROT_READ and MAP_PRIVATE. An empty file gives an empty map. Throws
  /// twell::Error(Io) naming the file and the failing call.
  static MemoryMap open(const std::filesystem::path& path);

  MemoryMap() = default;
  MemoryMap(MemoryMap&& other) noexcept;
  MemoryMap& operator=(MemoryMap&& other) noexcept;
  MemoryMap(const MemoryMap&) = delete;
  MemoryMap& operator=(const MemoryMap&) = delete;
  ~MemoryMap();

  std::span<const std::byte> bytes() const { return {m_data, m_size}; }
  std::uint64_t size() const { return m_size; }

 private:
  MemoryMap(const std::byte* data, std::size_t size) : m_data(data), m_size(size) {}
  void release() noexcept;
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
};

}  // namespace twell
