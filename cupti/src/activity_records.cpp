// SPDX-License-Identifier: GPL-3.0-or-later
#include "activity_records.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "cupti_check.hpp"

namespace twell::gpu_trace::detail {
namespace {

const char* memcpy_direction(std::uint8_t copy_kind) {
  switch (static_cast<CUpti_ActivityMemcpyKind>(copy_kind)) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "unknown";
  }
}

/// The fields every timed activity record carries, under the same CUPTI names.
template <typename Activity>
KernelRecord record_of(const char* kind, const Activity& activity) {
  KernelRecord record;
  record.kind = kind;
  record.start_ns = activity.start;
  record.end_ns = activity.end;
  record.device = activity.deviceId;
  record.context = activity.contextId;
  record.stream = activity.streamId;
  record.correlation_id = activity.correlationId;
  return record;
}

template <typename Activity>
void feed(const CUpti_Activity* activity, TagCorrelator& correlator, BufferTally& tally) {
  const auto& typed = *reinterpret_cast<const Activity*>(activity);
  if (typed.start == 0 || typed.end < typed.start) ++tally.incomplete;
  correlator.add_record(to_record(typed));
}

}  // namespace

bool has_times(const KernelRecord& record) {
  return record.start_ns != 0 && record.end_ns >= record.start_ns;
}

std::size_t drop_untimed(std::vector<KernelRecord>& records) {
  std::size_t attributed = 0;
  std::erase_if(records, [&](const KernelRecord& record) {
    if (has_times(record)) return false;
    if (record.attributed) ++attributed;
    return true;
  });
  return attributed;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                                   std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(name);
}

KernelRecord to_record(const KernelActivity& kernel) {
  KernelRecord record = record_of("kernel", kernel);
  record.name = demangle(kernel.name);
  record.grid = {kernel.gridX, kernel.gridY, kernel.gridZ};
  record.block = {kernel.blockX, kernel.blockY, kernel.blockZ};
  record.registers_per_thread = kernel.registersPerThread;
  record.static_shared_bytes = kernel.staticSharedMemory;
  record.dynamic_shared_bytes = kernel.dynamicSharedMemory;
  return record;
}

KernelRecord to_record(const MemcpyActivity& memcpy) {
  KernelRecord record = record_of("memcpy", memcpy);
  record.name = std::string("memcpy ") + memcpy_direction(memcpy.copyKind);
  record.bytes = memcpy.bytes;
  return record;
}

KernelRecord to_record(const MemsetActivity& memset) {
  KernelRecord record = record_of("memset", memset);
  record.name = "memset";
  record.bytes = memset.bytes;
  return record;
}

void feed_buffer(std::uint8_t* buffer, std::size_t valid_bytes, TagCorrelator& correlator,
                 BufferTally& tally) {
  if (buffer == nullptr || valid_bytes == 0) return;
  CUpti_Activity* activity = nullptr;
  for (;;) {
    const CUptiResult result = cuptiActivityGetNextRecord(buffer, valid_bytes, &activity);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) return;  // the end of the buffer
    check_cupti(result, "cuptiActivityGetNextRecord");
    switch (activity->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        feed<KernelActivity>(activity, correlator, tally);
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        feed<MemcpyActivity>(activity, correlator, tally);
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        feed<MemsetActivity>(activity, correlator, tally);
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto& link = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(activity);
        if (link.externalKind == kTagCorrelationKind)
          correlator.add_correlation(link.correlationId, link.externalId);
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace twell::gpu_trace::detail
