// SPDX-License-Identifier: GPL-3.0-or-later
#include "scripted_tracer.hpp"

#include <algorithm>

#include "twell/error.hpp"

namespace twell::test {

ScriptedTracer::ScriptedTracer(Mode mode, std::string fallback_reason)
    : m_mode(mode), m_fallback_reason(std::move(fallback_reason)) {}

TracerInfo ScriptedTracer::info() const {
  return {"scripted", "gpu", m_fallback_reason, m_mode == Mode::PerKernel};
}

void ScriptedTracer::launch(const ScriptedLaunch& launch) {
  m_clock_ns += m_gap_ns;
  Launched launched;
  launched.record.kind = launch.kind;
  launched.record.name = launch.name;
  launched.record.start_ns = m_clock_ns;
  launched.record.end_ns = m_clock_ns + launch.duration_ns;
  launched.record.correlation_id = ++m_next_correlation;
  if (!m_open.empty()) {
    launched.tagged = true;
    launched.external_id = m_open.back().external_id;
  }
  m_clock_ns = launched.record.end_ns;
  m_launched.push_back(std::move(launched));
}

void ScriptedTracer::push(const TraceTag& tag) {
  m_clock_ns += m_gap_ns;
  m_open.push_back({tag, m_correlator.open(tag), m_clock_ns});
  if (m_script) {
    for (const ScriptedLaunch& scripted : m_script(tag)) launch(scripted);
  }
}

void ScriptedTracer::pop() {
  if (m_open.empty()) throw Error(Error::Kind::Internal, "ScriptedTracer::pop without a matching push");
  const Open region = m_open.back();
  m_open.pop_back();
  m_correlator.close(region.external_id);
  m_clock_ns += m_gap_ns;
  if (m_mode == Mode::Region) {
    KernelRecord record;
    record.kind = "region";
    record.name = region.tag.op;
    record.start_ns = region.start_ns;
    record.end_ns = m_clock_ns;
    record.tag = region.tag;
    record.attributed = true;
    m_regions.push_back(std::move(record));
  }
}

std::vector<KernelRecord> ScriptedTracer::collect() {
  if (m_mode == Mode::Region) {
    m_launched.clear();
    m_correlator.take_attributed();  // forgets the closed regions' ids
    std::vector<KernelRecord> out = std::move(m_regions);
    m_regions.clear();
    sort_by_start(out);
    return out;
  }
  if (m_reverse) std::reverse(m_launched.begin(), m_launched.end());
  for (Launched& launched : m_launched) {
    if (launched.tagged) m_correlator.add_correlation(launched.record.correlation_id, launched.external_id);
    m_correlator.add_record(std::move(launched.record));
  }
  m_launched.clear();
  return m_correlator.take_attributed();
}

}  // namespace twell::test
