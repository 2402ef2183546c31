// SPDX-License-Identifier: GPL-3.0-or-later
#include "activity_buffers.hpp"

#include "cupti_check.hpp"

namespace twell::gpu_trace::detail {
namespace {

// CUPTI's guidance is 1-10 MiB per buffer; 4 MiB holds about 19 000 kernel records.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;
// Activity records must start 8-byte aligned.
constexpr std::size_t kBufferAlignment = 8;

}  // namespace

ActivityBufferStore& ActivityBufferStore::instance() {
  static ActivityBufferStore* store = new ActivityBufferStore();  // never destroyed, see the class comment
  return *store;
}

void CUPTIAPI ActivityBufferStore::on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                                       std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
  if (*buffer == nullptr) instance().add_error("could not allocate a 4 MiB CUPTI activity buffer");
}

void CUPTIAPI ActivityBufferStore::on_buffer_completed(CUcontext context, std::uint32_t stream_id,
                                                       std::uint8_t* buffer, std::size_t /*size*/,
                                                       std::size_t valid_bytes) {
  ActivityBufferStore& store = instance();
  ActivityBuffer completed;
  completed.data.reset(buffer);  // owned from here on, whatever happens below
  completed.valid_bytes = valid_bytes;
  std::size_t dropped = 0;
  const CUptiResult result = cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  try {
    if (result != CUPTI_SUCCESS) store.add_error(cupti_failure("cuptiActivityGetNumDroppedRecords", result));
    std::lock_guard lock(store.m_mutex);
    store.m_dropped += dropped;
    if (completed.data) store.m_completed.push_back(std::move(completed));
  } catch (...) {
    // Nothing may propagate into CUPTI; the buffer's records are lost and collect() says so.
    std::lock_guard lock(store.m_mutex);
    store.m_lost_buffers += 1;
  }
}

std::vector<ActivityBuffer> ActivityBufferStore::take_completed() {
  std::lock_guard lock(m_mutex);
  std::vector<ActivityBuffer> out = std::move(m_completed);
  m_completed.clear();
  return out;
}

std::uint64_t ActivityBufferStore::take_dropped() {
  std::lock_guard lock(m_mutex);
  const std::uint64_t dropped = m_dropped;
  m_dropped = 0;
  return dropped;
}

std::string ActivityBufferStore::take_errors() {
  std::lock_guard lock(m_mutex);
  std::string errors = std::move(m_errors);
  m_errors.clear();
  if (m_lost_buffers > 0) {
    if (!errors.empty()) errors += "; ";
    errors += std::to_string(m_lost_buffers) + " completed activity buffer(s) could not be stored";
    m_lost_buffers = 0;
  }
  return errors;
}

void ActivityBufferStore::add_error(const std::string& error) {
  std::lock_guard lock(m_mutex);
  if (!m_errors.empty()) m_errors += "; ";
  m_errors += error;
}

}  // namespace twell::gpu_trace::detail
