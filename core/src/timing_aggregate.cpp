// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/timing_aggregate.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "twell/error.hpp"
#include "twell/trace_attribution.hpp"

namespace twell::timing {
namespace {

double duration_us(const KernelRecord& record) {
  return record.end_ns > record.start_ns ? record.duration_us() : 0.0;
}

std::vector<double> values_of(const std::map<int, double>& per_repetition) {
  std::vector<double> values;
  values.reserve(per_repetition.size());
  for (const auto& [repetition, value] : per_repetition) values.push_back(value);
  return values;
}

/// The records in start order, so that "first appearance" is first in time.
std::vector<const KernelRecord*> in_start_order(const std::vector<KernelRecord>& records) {
  std::vector<const KernelRecord*> ordered;
  ordered.reserve(records.size());
  for (const KernelRecord& record : records) ordered.push_back(&record);
  std::stable_sort(ordered.begin(), ordered.end(), [](const KernelRecord* a, const KernelRecord* b) {
    return std::tie(a->start_ns, a->end_ns) < std::tie(b->start_ns, b->end_ns);
  });
  return ordered;
}

/// Groups keyed by K in order of first appearance, each with its busy time per repetition.
template <typename K>
class BusyGroups {
 public:
  void add(const K& key, const KernelRecord& record) {
    const auto [slot, inserted] = m_index.try_emplace(key, m_groups.size());
    if (inserted) m_groups.push_back({key, {}});
    m_groups[slot->second].second[record.tag.repetition] += duration_us(record);
  }
  const std::vector<std::pair<K, std::map<int, double>>>& groups() const { return m_groups; }

 private:
  std::map<K, std::size_t> m_index;
  std::vector<std::pair<K, std::map<int, double>>> m_groups;
};

}  // namespace

TimingStat summarize(std::vector<double> samples_us) {
  TimingStat stat;
  if (samples_us.empty()) return stat;
  std::sort(samples_us.begin(), samples_us.end());
  const std::size_t n = samples_us.size();
  stat.count = static_cast<std::uint32_t>(n);
  stat.min_us = samples_us.front();
  stat.max_us = samples_us.back();
  stat.median_us = n % 2 == 1 ? samples_us[n / 2] : (samples_us[n / 2 - 1] + samples_us[n / 2]) / 2.0;
  return stat;
}

double median_of_ratios(const std::vector<double>& numerators, const std::vector<double>& denominators) {
  if (numerators.size() != denominators.size()) {
    throw Error(Error::Kind::Internal, "median_of_ratios: " + std::to_string(numerators.size()) +
                                           " numerators but " + std::to_string(denominators.size()) +
                                           " denominators");
  }
  std::vector<double> ratios;
  ratios.reserve(numerators.size());
  for (std::size_t i = 0; i < numerators.size(); ++i) {
    if (!(denominators[i] > 0)) {
      throw Error(Error::Kind::Internal,
                  "median_of_ratios: denominator " + std::to_string(i) + " is not positive");
    }
    ratios.push_back(numerators[i] / denominators[i]);
  }
  return summarize(std::move(ratios)).median_us;
}

bool RecordFilter::matches(const KernelRecord& record) const {
  if (!record.attributed || record.tag.warmup) return false;
  if (phase && record.tag.phase != *phase) return false;
  if (layer && record.tag.layer != *layer) return false;
  if (path && record.tag.path != *path) return false;
  if (op && record.tag.op != *op) return false;
  return true;
}

std::map<int, double> busy_us_per_repetition(const std::vector<KernelRecord>& records,
                                             const RecordFilter& filter) {
  std::map<int, double> busy;
  for (const KernelRecord& record : records) {
    if (filter.matches(record)) busy[record.tag.repetition] += duration_us(record);
  }
  return busy;
}

std::map<int, double> span_us_per_repetition(const std::vector<KernelRecord>& records,
                                             const RecordFilter& filter) {
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> bounds;  // repetition -> (min start, max end)
  for (const KernelRecord& record : records) {
    if (!filter.matches(record)) continue;
    auto [it, inserted] = bounds.try_emplace(record.tag.repetition, record.start_ns, record.end_ns);
    if (!inserted) {
      it->second.first = std::min(it->second.first, record.start_ns);
      it->second.second = std::max(it->second.second, record.end_ns);
    }
  }
  std::map<int, double> spans;
  for (const auto& [repetition, bound] : bounds) {
    spans[repetition] =
        bound.second > bound.first ? static_cast<double>(bound.second - bound.first) / 1000.0 : 0.0;
  }
  return spans;
}

std::map<int, double> occupied_us_per_repetition(const std::vector<KernelRecord>& records,
                                                 const RecordFilter& filter) {
  // Sweeping each repetition's intervals in start order: a record that starts after the covered
  // stretch ends opens a new stretch, one that starts inside it can only extend it.
  struct Sweep {
    std::uint64_t stretch_start = 0, stretch_end = 0, closed_ns = 0;
  };
  std::map<int, Sweep> sweeps;
  for (const KernelRecord* record : in_start_order(records)) {
    if (!filter.matches(*record) || record->end_ns <= record->start_ns) continue;
    auto [it, inserted] = sweeps.try_emplace(record->tag.repetition);
    Sweep& sweep = it->second;
    if (inserted || record->start_ns > sweep.stretch_end) {
      if (!inserted) sweep.closed_ns += sweep.stretch_end - sweep.stretch_start;
      sweep.stretch_start = record->start_ns;
      sweep.stretch_end = record->end_ns;
    } else {
      sweep.stretch_end = std::max(sweep.stretch_end, record->end_ns);
    }
  }
  std::map<int, double> occupied;
  for (const auto& [repetition, sweep] : sweeps)
    occupied[repetition] =
        static_cast<double>(sweep.closed_ns + (sweep.stretch_end - sweep.stretch_start)) / 1000.0;
  return occupied;
}

TimingStat busy_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter) {
  return summarize(values_of(busy_us_per_repetition(records, filter)));
}

TimingStat span_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter) {
  return summarize(values_of(span_us_per_repetition(records, filter)));
}

TimingStat occupied_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter) {
  return summarize(values_of(occupied_us_per_repetition(records, filter)));
}

std::vector<PathTiming> path_timings(const std::vector<KernelRecord>& records, int layer,
                                     const std::string& phase) {
  const RecordFilter filter{.phase = phase, .layer = layer};
  BusyGroups<std::string> paths;
  BusyGroups<std::pair<std::string, std::string>> ops;  // (path, op)
  for (const KernelRecord* record : in_start_order(records)) {
    if (!filter.matches(*record)) continue;
    paths.add(record->tag.path, *record);
    ops.add({record->tag.path, record->tag.op}, *record);
  }
  std::vector<PathTiming> out;
  for (const auto& [path, per_repetition] : paths.groups()) {
    PathTiming timing;
    timing.path = path;
    timing.total = summarize(values_of(per_repetition));
    for (const auto& [key, op_per_repetition] : ops.groups()) {
      if (key.first == path) timing.ops.push_back({key.second, summarize(values_of(op_per_repetition))});
    }
    out.push_back(std::move(timing));
  }
  return out;
}

std::vector<KernelStat> kernel_stats(const std::vector<KernelRecord>& records, const std::string& phase) {
  const RecordFilter filter{.phase = phase};
  using Key = std::tuple<int, std::string, std::string, std::string>;  // layer, path, op, name
  BusyGroups<Key> kernels;
  for (const KernelRecord* record : in_start_order(records)) {
    if (!filter.matches(*record)) continue;
    kernels.add({record->tag.layer, record->tag.path, record->tag.op, record->name}, *record);
  }
  std::vector<KernelStat> out;
  for (const auto& [key, per_repetition] : kernels.groups()) {
    KernelStat stat;
    std::tie(stat.layer, stat.path, stat.op, stat.name) = key;
    stat.time = summarize(values_of(per_repetition));
    out.push_back(std::move(stat));
  }
  return out;
}

std::optional<int> first_timed_repetition(const std::vector<KernelRecord>& records,
                                          const RecordFilter& filter) {
  std::optional<int> first;
  for (const KernelRecord& record : records) {
    if (filter.matches(record) && (!first || record.tag.repetition < *first)) first = record.tag.repetition;
  }
  return first;
}

std::vector<KernelRecord> records_of_repetition(const std::vector<KernelRecord>& records, int repetition,
                                                const RecordFilter& filter) {
  std::vector<KernelRecord> selected;
  for (const KernelRecord& record : records) {
    if (filter.matches(record) && record.tag.repetition == repetition) selected.push_back(record);
  }
  sort_by_start(selected);
  return selected;
}

}  // namespace twell::timing
