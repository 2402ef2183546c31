// SPDX-License-Identifier: GPL-3.0-or-later
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <array>
#include <atomic>
#include <optional>
#include <vector>

#include "activity_buffers.hpp"
#include "activity_records.hpp"
#include "cupti_check.hpp"
#include "nvtx_ranges.hpp"
#include "twell/cupti/tracers.hpp"
#include "twell/trace_attribution.hpp"

namespace twell::gpu_trace {
namespace {

using detail::check_cuda;
using detail::check_cupti;
using detail::cupti_failure;
using Cause = CuptiUnavailable::Cause;

// Kernels, copies and memsets are what we time. External correlation ties them to our tags, and
// CUPTI emits external-correlation records only for API records, so runtime and driver API
// tracing must be on too (their records are read past). CONCURRENT_KERNEL, unlike KERNEL, does
// not serialize kernels.
constexpr std::array kActivityKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,    CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
};

Cause cause_of(CUptiResult result) {
  switch (result) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return Cause::AnotherSubscriber;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return Cause::InsufficientPrivileges;
    default:
      return Cause::Other;
  }
}

[[noreturn]] void unavailable(Cause cause, std::string detail) {
  throw CuptiUnavailableError(CuptiUnavailable{cause, std::move(detail)});
}

/// CUDA without a driver or a device fails inside CUPTI with unhelpful codes (enable returns
/// CUPTI_ERROR_UNKNOWN), so ask the runtime first and name the real reason.
void require_driver_and_device() {
  int driver_version = 0;
  if (cudaDriverGetVersion(&driver_version) != cudaSuccess || driver_version == 0) {
    cudaGetLastError();
    unavailable(Cause::NoDriver, "cudaDriverGetVersion reports no NVIDIA driver");
  }
  int devices = 0;
  const cudaError_t result = cudaGetDeviceCount(&devices);
  if (result != cudaSuccess || devices == 0) {
    cudaGetLastError();
    unavailable(Cause::NoDriver, result != cudaSuccess
                                     ? std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(result)
                                     : std::string("cudaGetDeviceCount found no CUDA device"));
  }
}

/// CUPTI allows one subscriber per process: this flag makes a second tracer an error, not UB.
std::atomic<bool> g_tracer_live{false};

class LiveTracerClaim {
 public:
  LiveTracerClaim() {
    if (g_tracer_live.exchange(true)) {
      unavailable(Cause::AlreadyInUse, "make_cupti_tracer was called while another CUPTI tracer is alive");
    }
  }
  ~LiveTracerClaim() { g_tracer_live.store(false); }
  LiveTracerClaim(const LiveTracerClaim&) = delete;
  LiveTracerClaim& operator=(const LiveTracerClaim&) = delete;
};

/// Subscribing is how a CUPTI client claims CUPTI; it fails, naming the owner, under Nsight,
/// compute-sanitizer or cuda-gdb. No callbacks are enabled on the subscription.
class Subscription {
 public:
  Subscription() {
    std::array<char, CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1> owner{};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "twellscope";
    params.oldSubscriberName = owner.data();
    params.oldSubscriberSize = owner.size() - 1;
    const CUptiResult result = cuptiSubscribe_v2(&m_handle, &Subscription::ignore_callback, nullptr, &params);
    if (result != CUPTI_SUCCESS) {
      std::string detail = cupti_failure("cuptiSubscribe_v2", result);
      if (owner[0] != '\0') detail += " (current subscriber: " + std::string(owner.data()) + ")";
      unavailable(cause_of(result), detail);
    }
  }
  ~Subscription() { cuptiUnsubscribe(m_handle); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  static void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
  CUpti_SubscriberHandle m_handle = nullptr;
};

/// The enabled activity kinds; disabling in reverse on destruction leaves CUPTI quiet, so the
/// next tracer (and untraced work in between) starts clean.
class EnabledActivities {
 public:
  EnabledActivities() {
    for (const CUpti_ActivityKind kind : kActivityKinds) {
      const CUptiResult result = cuptiActivityEnable(kind);
      if (result != CUPTI_SUCCESS) {
        disable_all();
        unavailable(cause_of(result), cupti_failure("cuptiActivityEnable", result) + " (activity kind " +
                                          std::to_string(static_cast<int>(kind)) + ")");
      }
      m_enabled.push_back(kind);
    }
  }
  ~EnabledActivities() { disable_all(); }
  EnabledActivities(const EnabledActivities&) = delete;
  EnabledActivities& operator=(const EnabledActivities&) = delete;

 private:
  void disable_all() noexcept {
    for (auto kind = m_enabled.rbegin(); kind != m_enabled.rend(); ++kind) cuptiActivityDisable(*kind);
    m_enabled.clear();
  }
  std::vector<CUpti_ActivityKind> m_enabled;
};

void register_buffer_callbacks() {
  const CUptiResult result = cuptiActivityRegisterCallbacks(
      &detail::ActivityBufferStore::on_buffer_requested, &detail::ActivityBufferStore::on_buffer_completed);
  if (result != CUPTI_SUCCESS)
    unavailable(cause_of(result), cupti_failure("cuptiActivityRegisterCallbacks", result));
}

/// Hands every buffer CUPTI still holds back to the store and forgets what was in them.
void discard_pending_activity() noexcept {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  auto& store = detail::ActivityBufferStore::instance();
  store.take_completed();
  store.take_dropped();
  store.take_errors();
}

class CuptiTracer final : public Tracer {
 public:
  CuptiTracer() {
    register_buffer_callbacks();
    m_activities.emplace();
    discard_pending_activity();  // leftovers of an earlier tracer in this process
  }

  ~CuptiTracer() override {
    // Unbalanced tags (an exception unwound past them) must not stay on CUPTI's per-thread stack.
    for (std::size_t i = 0; i < m_open_ids.size(); ++i) {
      cuptiActivityPopExternalCorrelationId(detail::kTagCorrelationKind, nullptr);
      m_nvtx.pop();
    }
    m_activities.reset();
    discard_pending_activity();
  }

  TracerInfo info() const override { return {"cupti", "gpu", "", true}; }

  void push(const TraceTag& tag) override {
    const std::uint64_t id = m_correlator.open(tag);
    const CUptiResult result = cuptiActivityPushExternalCorrelationId(detail::kTagCorrelationKind, id);
    if (result != CUPTI_SUCCESS) {
      m_correlator.close(id);
      check_cupti(result, "cuptiActivityPushExternalCorrelationId");
    }
    m_open_ids.push_back(id);
    m_nvtx.push(trace_tag_label(tag));
  }

  void pop() override {
    if (m_open_ids.empty()) throw Error(Error::Kind::Internal, "CuptiTracer::pop without a matching push");
    const std::uint64_t expected = m_open_ids.back();
    m_open_ids.pop_back();
    m_nvtx.pop();
    m_correlator.close(expected);
    std::uint64_t popped = 0;
    check_cupti(cuptiActivityPopExternalCorrelationId(detail::kTagCorrelationKind, &popped),
                "cuptiActivityPopExternalCorrelationId");
    if (popped != expected) {
      throw Error(Error::Kind::Internal, "CuptiTracer::pop: CUPTI popped external id " +
                                             std::to_string(popped) + " where " + std::to_string(expected) +
                                             " was pushed (push and pop on different threads, or another "
                                             "user of CUSTOM0 ids)");
    }
  }

  std::vector<KernelRecord> collect() override {
    // A forced flush returns incomplete records too, so wait for the work first.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before flushing CUPTI)");
    check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    auto& store = detail::ActivityBufferStore::instance();
    detail::BufferTally tally;
    for (detail::ActivityBuffer& buffer : store.take_completed()) {
      detail::feed_buffer(buffer.data.get(), buffer.valid_bytes, m_correlator, tally);
    }
    const std::string errors = store.take_errors();
    const std::uint64_t dropped = store.take_dropped();
    std::vector<KernelRecord> records = m_correlator.take_attributed();
    if (!errors.empty()) throw Error(Error::Kind::Device, "CUPTI activity buffers: " + errors);
    if (dropped > 0) {
      throw Error(Error::Kind::Device, "CUPTI dropped " + std::to_string(dropped) +
                                           " activity records: the timings would be incomplete");
    }
    if (tally.incomplete > 0) {
      // Untagged ones are other code's work, possibly still running on another device; an
      // untimed tagged record would make its tag's time wrong.
      const std::size_t tagged = detail::drop_untimed(records);
      if (tagged > 0) {
        throw Error(Error::Kind::Device, "CUPTI returned " + std::to_string(tagged) +
                                             " tagged activity records without timestamps after a device "
                                             "synchronize and a forced flush");
      }
    }
    return records;
  }

 private:
  LiveTracerClaim m_claim;  // first member: released last
  Subscription m_subscription;
  std::optional<EnabledActivities> m_activities;
  TagCorrelator m_correlator;
  std::vector<std::uint64_t> m_open_ids;
  detail::NvtxRanges m_nvtx;
};

}  // namespace

std::unique_ptr<Tracer> make_cupti_tracer() {
  // Ask about the driver before claiming CUPTI: without one, CUPTI's own errors say little.
  require_driver_and_device();
  return std::make_unique<CuptiTracer>();
}

}  // namespace twell::gpu_trace
