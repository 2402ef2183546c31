// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/trace_attribution.hpp"

#include <algorithm>
#include <tuple>

#include "twell/error.hpp"

namespace twell {

std::string trace_tag_label(const TraceTag& tag) {
  std::string label;
  if (tag.layer >= 0) {
    label = "L" + std::to_string(tag.layer);
  } else {
    label = tag.phase.empty() ? std::string("untagged") : tag.phase;
  }
  if (!tag.path.empty() || !tag.op.empty()) {
    label += ' ';
    label += tag.path;
    if (!tag.path.empty() && !tag.op.empty()) label += '/';
    label += tag.op;
  }
  label += " r" + std::to_string(tag.repetition);
  if (tag.warmup) label += " (warm-up)";
  return label;
}

std::uint64_t TagCorrelator::open(const TraceTag& tag) {
  const std::uint64_t id = ++m_next_id;
  m_tags.emplace(id, Entry{tag, true});
  ++m_open_count;
  return id;
}

void TagCorrelator::close(std::uint64_t external_id) {
  const auto found = m_tags.find(external_id);
  if (found == m_tags.end() || !found->second.open) {
    throw Error(Error::Kind::Internal,
                "TagCorrelator::close: external id " + std::to_string(external_id) + " is not open");
  }
  found->second.open = false;
  --m_open_count;
}

void TagCorrelator::add_correlation(std::uint64_t correlation_id, std::uint64_t external_id) {
  m_external_of_correlation[correlation_id] = external_id;
}

void TagCorrelator::add_record(KernelRecord record) {
  m_records.push_back(std::move(record));
}

std::vector<KernelRecord> TagCorrelator::take_attributed() {
  std::vector<KernelRecord> out = std::move(m_records);
  m_records.clear();
  for (KernelRecord& record : out) {
    record.attributed = false;
    record.tag = TraceTag{};
    const auto external = m_external_of_correlation.find(record.correlation_id);
    if (external == m_external_of_correlation.end()) continue;
    const auto tag = m_tags.find(external->second);
    if (tag == m_tags.end()) continue;  // an id pushed by someone else under our kind
    record.tag = tag->second.tag;
    record.attributed = true;
  }
  m_external_of_correlation.clear();
  std::erase_if(m_tags, [](const auto& item) { return !item.second.open; });
  sort_by_start(out);
  return out;
}

void sort_by_start(std::vector<KernelRecord>& records) {
  std::stable_sort(records.begin(), records.end(), [](const KernelRecord& a, const KernelRecord& b) {
    return std::tie(a.start_ns, a.end_ns, a.correlation_id) <
           std::tie(b.start_ns, b.end_ns, b.correlation_id);
  });
}

}  // namespace twell
