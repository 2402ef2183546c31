// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace twell {

/// What a group of launches belongs to. Every kernel launched between Tracer::push(tag) and
/// pop() is attributed to the tag, whatever library launched it.
struct TraceTag {
  std::string phase;        ///< "layer_ffn" (per-layer comparison), "end_to_end", "capture"
  int layer = -1;           ///< -1: not a layer (embedding, final norm, a whole forward)
  std::string path;         ///< "dense", "twell", or "" outside the FFN comparison
  std::string op;           ///< "gate_pack", "up_down", "gate_up", "down", "attention", "forward"...
  int repetition = 0;
  bool warmup = false;      ///< warm-up repetitions are recorded but excluded from statistics
  bool operator==(const TraceTag&) const = default;
};

/// One GPU activity (or, for the CPU backend, one timed CPU operation), in core's own terms.
struct KernelRecord {
  std::string kind = "kernel";  ///< "kernel", "memcpy", "memset", "cpu", or "region" (a CUDA-event pair)
  std::string name;             ///< demangled
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t device = 0, context = 0, stream = 0;
  std::array<std::int32_t, 3> grid{0, 0, 0};
  std::array<std::int32_t, 3> block{0, 0, 0};
  std::int32_t registers_per_thread = 0;
  std::int32_t static_shared_bytes = 0;
  std::int32_t dynamic_shared_bytes = 0;
  std::uint64_t correlation_id = 0;
  std::uint64_t bytes = 0;      ///< memcpy / memset size
  TraceTag tag;
  bool attributed = false;      ///< false when the record arrived outside any tag
  double duration_us() const { return static_cast<double>(end_ns - start_ns) / 1000.0; }
  bool operator==(const KernelRecord&) const = default;
};

/// Which tracer measured, in what time domain, and why a fallback was taken.
struct TracerInfo {
  std::string name;             ///< "cupti", "cuda-events", "cpu-clock", "scripted"
  std::string clock = "gpu";    ///< "gpu" or "cpu": CPU timings are labelled as such everywhere
  std::string fallback_reason;  ///< empty unless a preferred tracer could not be used
  bool per_kernel = true;       ///< false when one record covers a whole tagged region
  bool operator==(const TracerInfo&) const = default;
};

/// Times tagged regions of work. Implementations: CUPTI and CUDA events (cupti/), a CPU clock
/// (core/), a scripted fake (tests/).
class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual TracerInfo info() const = 0;
  virtual void push(const TraceTag& tag) = 0;
  virtual void pop() = 0;
  /// Waits for the traced work, then returns every record since the last collect, attributed
  /// and ordered by start time.
  virtual std::vector<KernelRecord> collect() = 0;
};

/// Pushes a tag for the lifetime of the scope. A null tracer makes it a no-op.
class ScopedTrace {
 public:
  ScopedTrace(Tracer* tracer, TraceTag tag) : m_tracer(tracer) {
    if (m_tracer) m_tracer->push(tag);
  }
  ~ScopedTrace() {
    if (m_tracer) m_tracer->pop();
  }
  ScopedTrace(const ScopedTrace&) = delete;
  ScopedTrace& operator=(const ScopedTrace&) = delete;

 private:
  Tracer* m_tracer;
};

/// Wall-clock timing of CPU work: one "cpu" record per tagged region.
std::unique_ptr<Tracer> make_cpu_clock_tracer();

}  // namespace twell
