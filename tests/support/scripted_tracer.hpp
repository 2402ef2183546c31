// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "twell/trace_attribution.hpp"
#include "twell/tracer.hpp"

namespace twell::test {

/// One piece of scripted GPU work.
struct ScriptedLaunch {
  std::string name;
  std::uint64_t duration_ns = 1000;
  std::string kind = "kernel";
};

/// A fake Tracer whose "GPU" is a virtual clock: the test scripts what each tagged region
/// launches and gets exactly those records back, through the same TagCorrelator join that the
/// CUPTI tracer uses. Launches run back to back on one stream, `gap_ns` apart.
///
/// PerKernel mode behaves like CUPTI: one record per launch, attributed to the innermost open
/// tag by correlation id, and (optionally) delivered to the correlator in reverse order, since
/// CUPTI's buffers are not time-ordered. Region mode behaves like the CUDA-event fallback: one
/// record per pushed region, named after its op, spanning push to pop.
class ScriptedTracer final : public Tracer {
 public:
  enum class Mode { PerKernel, Region };
  using Script = std::function<std::vector<ScriptedLaunch>(const TraceTag&)>;

  explicit ScriptedTracer(Mode mode = Mode::PerKernel, std::string fallback_reason = {});

  /// What a region launches when its tag is pushed; called once per push.
  void set_script(Script script) { m_script = std::move(script); }
  /// Launches under the innermost open tag (or untagged when none is open), as code between
  /// push and pop would.
  void launch(const ScriptedLaunch& launch);
  void set_gap_ns(std::uint64_t gap_ns) { m_gap_ns = gap_ns; }
  void set_deliver_in_reverse(bool reverse) { m_reverse = reverse; }

  TracerInfo info() const override;
  void push(const TraceTag& tag) override;
  void pop() override;
  std::vector<KernelRecord> collect() override;

  std::size_t open_depth() const { return m_open.size(); }

 private:
  struct Open {
    TraceTag tag;
    std::uint64_t external_id = 0;
    std::uint64_t start_ns = 0;
  };
  struct Launched {
    KernelRecord record;
    bool tagged = false;
    std::uint64_t external_id = 0;
  };

  Mode m_mode;
  std::string m_fallback_reason;
  Script m_script;
  std::uint64_t m_gap_ns = 500;
  bool m_reverse = false;
  std::uint64_t m_clock_ns = 1'000'000;
  std::uint64_t m_next_correlation = 0;
  std::vector<Open> m_open;
  std::vector<Launched> m_launched;
  std::vector<KernelRecord> m_regions;
  TagCorrelator m_correlator;
};

}  // namespace twell::test
