// SPDX-License-Identifier: GPL-3.0-or-later
// RAII device memory: one cudaMalloc'd array of T, freed on destruction, movable, never copied.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "twell/kernels/cuda_check.hpp"

namespace twell::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) { allocate(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : m_data(std::exchange(other.m_data, nullptr)), m_count(std::exchange(other.m_count, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      m_data = std::exchange(other.m_data, nullptr);
      m_count = std::exchange(other.m_count, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return m_data; }
  const T* data() const { return m_data; }
  std::size_t size() const { return m_count; }
  std::size_t bytes() const { return m_count * sizeof(T); }
  bool empty() const { return m_count == 0; }

  /// Grows to at least `count` elements; contents are not kept when it reallocates.
  void ensure(std::size_t count) {
    if (count > m_count) {
      release();
      allocate(count);
    }
  }

  void copy_from_host(const T* host, std::size_t count, cudaStream_t stream) {
    ensure(count);
    TWELL_CUDA_CHECK(cudaMemcpyAsync(m_data, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  void copy_to_host(T* host, std::size_t count, cudaStream_t stream) const {
    TWELL_CUDA_CHECK(cudaMemcpyAsync(host, m_data, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }

 private:
  void allocate(std::size_t count) {
    if (count == 0) return;
    void* pointer = nullptr;
    const cudaError_t status = cudaMalloc(&pointer, count * sizeof(T));
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky: leave no stale error behind
      throw_cuda_error(status, ("cudaMalloc of " + std::to_string(count * sizeof(T)) + " bytes").c_str(),
                       __FILE__, __LINE__);
    }
    m_data = static_cast<T*>(pointer);
    m_count = count;
  }
  void release() noexcept {
    if (m_data) cudaFree(m_data);
    m_data = nullptr;
    m_count = 0;
  }

  T* m_data = nullptr;
  std::size_t m_count = 0;
};

/// Page-locked host memory for asynchronous device-to-host copies of small results.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t count) : m_count(count) {
    void* pointer = nullptr;
    TWELL_CUDA_CHECK(cudaMallocHost(&pointer, count * sizeof(T)));
    m_data = static_cast<T*>(pointer);
  }
  ~PinnedBuffer() {
    if (m_data) cudaFreeHost(m_data);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* data() { return m_data; }
  const T* data() const { return m_data; }
  std::size_t size() const { return m_count; }

 private:
  T* m_data = nullptr;
  std::size_t m_count = 0;
};

}  // namespace twell::cuda
