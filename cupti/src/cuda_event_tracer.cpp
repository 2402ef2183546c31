// SPDX-License-Identifier: GPL-3.0-or-later
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "cupti_check.hpp"
#include "nvtx_ranges.hpp"
#include "twell/cupti/tracers.hpp"
#include "twell/trace_attribution.hpp"

namespace twell::gpu_trace {
namespace {

using detail::check_cuda;

std::uint64_t steady_now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

/// Times each tagged region with a pair of CUDA events on one stream: the fallback when CUPTI
/// is owned by another tool. Events give GPU time between the two points in the stream, so a
/// region's record covers its kernels and the gaps between them, but not work on other streams.
///
/// Event times are relative (cudaEventElapsedTime, float milliseconds), so each batch of regions
/// between two collect() calls is measured from a base event recorded at its first push, and
/// placed on the host's steady clock at the moment that base was recorded. The base is per
/// batch because a float loses sub-microsecond precision after a few seconds.
class CudaEventTracer final : public Tracer {
 public:
  CudaEventTracer(cudaStream_t stream, std::string fallback_reason)
      : m_stream(stream), m_fallback_reason(std::move(fallback_reason)) {
    check_cuda(cudaGetDevice(&m_device), "cudaGetDevice (CUDA-event tracer)");
    unsigned long long stream_id = 0;
    check_cuda(cudaStreamGetId(m_stream, &stream_id), "cudaStreamGetId");
    m_stream_id = static_cast<std::uint32_t>(stream_id);
  }

  ~CudaEventTracer() override {
    for (std::size_t i = 0; i < m_open.size(); ++i) m_nvtx.pop();
    for (cudaEvent_t event : m_all_events) cudaEventDestroy(event);
  }

  TracerInfo info() const override { return {"cuda-events", "gpu", m_fallback_reason, false}; }

  void push(const TraceTag& tag) override {
    if (m_base == nullptr) {
      m_base = record_event("cudaEventRecord (batch base)");
      m_base_host_ns = steady_now_ns();
    }
    m_nvtx.push(trace_tag_label(tag));
    m_open.push_back({tag, record_event("cudaEventRecord (region start)"), nullptr});
  }

  void pop() override {
    if (m_open.empty()) throw Error(Error::Kind::Internal, "CudaEventTracer::pop without a matching push");
    Region region = m_open.back();
    m_open.pop_back();
    m_nvtx.pop();
    region.end = record_event("cudaEventRecord (region end)");
    m_closed.push_back(region);
  }

  std::vector<KernelRecord> collect() override {
    check_cuda(cudaStreamSynchronize(m_stream), "cudaStreamSynchronize (CUDA-event tracer collect)");
    std::vector<KernelRecord> records;
    records.reserve(m_closed.size());
    for (const Region& region : m_closed) {
      KernelRecord record;
      record.kind = "region";
      record.name = region.tag.op.empty() ? std::string("region") : region.tag.op;
      record.start_ns = m_base_host_ns + elapsed_ns(m_base, region.start);
      record.end_ns = record.start_ns + elapsed_ns(region.start, region.end);
      record.device = static_cast<std::uint32_t>(m_device);
      record.stream = m_stream_id;
      record.correlation_id = ++m_regions_timed;
      record.tag = region.tag;
      record.attributed = true;
      records.push_back(std::move(record));
      m_free_events.push_back(region.start);
      m_free_events.push_back(region.end);
    }
    m_closed.clear();
    if (m_open.empty() && m_base != nullptr) {  // open regions were measured from this base: keep it
      m_free_events.push_back(m_base);
      m_base = nullptr;
    }
    sort_by_start(records);
    return records;
  }

 private:
  struct Region {
    TraceTag tag;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };

  cudaEvent_t record_event(const char* what) {
    cudaEvent_t event = nullptr;
    if (m_free_events.empty()) {
      check_cuda(cudaEventCreateWithFlags(&event, cudaEventDefault), "cudaEventCreateWithFlags");
      m_all_events.push_back(event);
    } else {
      event = m_free_events.back();
      m_free_events.pop_back();
    }
    const cudaError_t result = cudaEventRecord(event, m_stream);
    if (result != cudaSuccess) {
      m_free_events.push_back(event);
      check_cuda(result, what);
    }
    return event;
  }

  static std::uint64_t elapsed_ns(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime");
    return ms <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(static_cast<double>(ms) * 1e6));
  }

  cudaStream_t m_stream;
  std::string m_fallback_reason;
  int m_device = 0;
  std::uint32_t m_stream_id = 0;
  std::vector<cudaEvent_t> m_all_events;
  std::vector<cudaEvent_t> m_free_events;
  cudaEvent_t m_base = nullptr;
  std::uint64_t m_base_host_ns = 0;
  std::vector<Region> m_open;
  std::vector<Region> m_closed;
  std::uint64_t m_regions_timed = 0;
  detail::NvtxRanges m_nvtx;
};

}  // namespace

std::unique_ptr<Tracer> make_cuda_event_tracer(void* stream, std::string fallback_reason) {
  return std::make_unique<CudaEventTracer>(static_cast<cudaStream_t>(stream), std::move(fallback_reason));
}

}  // namespace twell::gpu_trace
