// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace twell::gpu_trace::detail {

/// A buffer CUPTI filled with activity records.
struct ActivityBuffer {
  struct Free {
    void operator()(std::uint8_t* data) const noexcept { std::free(data); }
  };
  std::unique_ptr<std::uint8_t, Free> data;
  std::size_t valid_bytes = 0;
};

/// Hands CUPTI its activity buffers and keeps the completed ones until the tracer drains them.
/// CUPTI's buffer callbacks take no user pointer, so this store is process-wide; it is never
/// destroyed, because CUPTI may still call back during process exit. The completion callback
/// runs on CUPTI's worker thread (or inside cuptiActivityFlushAll): it only moves the buffer
/// into the list under a short lock, and parsing happens later on the tracer's thread.
class ActivityBufferStore {
 public:
  static ActivityBufferStore& instance();

  /// The trampolines passed to cuptiActivityRegisterCallbacks.
  static void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                           std::size_t* max_records);
  static void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                           std::size_t size, std::size_t valid_bytes);

  /// Every completed buffer since the last call.
  std::vector<ActivityBuffer> take_completed();
  /// Records CUPTI dropped since the last call (it ran out of buffer space).
  std::uint64_t take_dropped();
  /// Problems met inside the callbacks, which cannot throw; empty when none.
  std::string take_errors();

 private:
  ActivityBufferStore() = default;
  void add_error(const std::string& error);

  std::mutex m_mutex;
  std::vector<ActivityBuffer> m_completed;
  std::uint64_t m_dropped = 0;
  std::uint64_t m_lost_buffers = 0;
  std::string m_errors;
};

}  // namespace twell::gpu_trace::detail
