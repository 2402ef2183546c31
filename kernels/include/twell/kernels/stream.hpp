// SPDX-License-Identifier: GPL-3.0-or-later
// RAII CUDA streams and events.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "twell/kernels/cuda_check.hpp"

namespace twell::cuda {

/// An owned non-blocking stream.
class Stream {
 public:
  Stream() { TWELL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking)); }
  /// A non-blocking stream whose kernels the block scheduler prefers over lower-priority streams'
  /// (numerically lower is higher; see highest_stream_priority).
  explicit Stream(int priority) {
    TWELL_CUDA_CHECK(cudaStreamCreateWithPriority(&m_stream, cudaStreamNonBlocking, priority));
  }
  ~Stream() {
    if (m_stream) cudaStreamDestroy(m_stream);
  }
  Stream(Stream&& other) noexcept : m_stream(std::exchange(other.m_stream, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return m_stream; }
  void synchronize() const { TWELL_CUDA_CHECK(cudaStreamSynchronize(m_stream)); }

 private:
  cudaStream_t m_stream = nullptr;
};

/// The highest stream priority this device supports.
inline int highest_stream_priority() {
  int least = 0, greatest = 0;
  TWELL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

/// An owned event; timing-enabled unless asked otherwise.
class Event {
 public:
  explicit Event(bool timing = true) {
    TWELL_CUDA_CHECK(cudaEventCreateWithFlags(&m_event, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (m_event) cudaEventDestroy(m_event);
  }
  Event(Event&& other) noexcept : m_event(std::exchange(other.m_event, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return m_event; }
  void record(cudaStream_t stream) { TWELL_CUDA_CHECK(cudaEventRecord(m_event, stream)); }
  void synchronize() const { TWELL_CUDA_CHECK(cudaEventSynchronize(m_event)); }
  /// Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const {
    float ms = 0;
    TWELL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.m_event, m_event));
    return ms;
  }

 private:
  cudaEvent_t m_event = nullptr;
};

}  // namespace twell::cuda
