// SPDX-License-Identifier: GPL-3.0-or-later
#include <algorithm>
#include <chrono>
#include <vector>

#include "twell/error.hpp"
#include "twell/tracer.hpp"

namespace twell {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Times each tagged region of CPU work with the steady clock. Nested regions each get a record,
/// so a whole forward and its ops are both visible, as on the GPU.
class CpuClockTracer final : public Tracer {
 public:
  TracerInfo info() const override { return {"cpu-clock", "cpu", "", false}; }

  void push(const TraceTag& tag) override { m_open.push_back({tag, now_ns()}); }

  void pop() override {
    if (m_open.empty()) throw Error(Error::Kind::Internal, "CpuClockTracer::pop without a matching push");
    const auto [tag, start] = m_open.back();
    m_open.pop_back();
    KernelRecord record;
    record.kind = "cpu";
    record.name = tag.op.empty() ? std::string("cpu") : "cpu:" + tag.op;
    record.start_ns = start;
    record.end_ns = std::max(now_ns(), start + 1);
    record.correlation_id = ++m_next_id;
    record.tag = tag;
    record.attributed = true;
    m_records.push_back(std::move(record));
  }

  std::vector<KernelRecord> collect() override {
    std::vector<KernelRecord> out = std::move(m_records);
    m_records.clear();
    std::stable_sort(out.begin(), out.end(),
                     [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
    return out;
  }

 private:
  struct Open {
    TraceTag tag;
    std::uint64_t start;
  };
  std::vector<Open> m_open;
  std::vector<KernelRecord> m_records;
  std::uint64_t m_next_id = 0;
};

}  // namespace

std::unique_ptr<Tracer> make_cpu_clock_tracer() { return std::make_unique<CpuClockTracer>(); }

}  // namespace twell
