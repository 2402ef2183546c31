// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "twell/tracer.hpp"

namespace twell {

/// A tag's human name, used for NVTX ranges (so Nsight Systems shows the same regions) and for
/// region records: "L3 dense/gate_up r2", "end_to_end twell/forward r0 (warm-up)".
std::string trace_tag_label(const TraceTag& tag);

/// Joins activity records to the tags that were open when their work was launched, the way
/// CUPTI's external correlation works: each open tag gets an external id; the profiler reports
/// (correlation id -> external id) pairs for launches made while an id was pushed, and every
/// activity record carries its launch's correlation id. Records and pairs may arrive in any
/// order and in any batch; take_attributed() joins what it has. Knows nothing about CUPTI, so
/// the join is tested without a GPU. Not thread-safe: one owner feeds and drains it.
class TagCorrelator {
 public:
  /// Registers `tag` under a fresh external id (never 0) and returns the id.
  std::uint64_t open(const TraceTag& tag);
  /// Marks the id closed: its tag is kept until the next take_attributed(), since records of
  /// work launched under it may still be in flight.
  void close(std::uint64_t external_id);
  /// Launches with this correlation id happened under `external_id`.
  void add_correlation(std::uint64_t correlation_id, std::uint64_t external_id);
  void add_record(KernelRecord record);

  /// Every record added since the last call, each given the tag of its launch (attributed) or
  /// left unattributed, ordered by start time (ties by end, then correlation id). Forgets the
  /// correlations and the closed tags afterwards; open tags stay.
  std::vector<KernelRecord> take_attributed();

  std::size_t open_count() const { return m_open_count; }

 private:
  struct Entry {
    TraceTag tag;
    bool open = true;
  };
  std::unordered_map<std::uint64_t, Entry> m_tags;
  std::unordered_map<std::uint64_t, std::uint64_t> m_external_of_correlation;
  std::vector<KernelRecord> m_records;
  std::uint64_t m_next_id = 0;
  std::size_t m_open_count = 0;
};

/// Orders records by start time; ties by end time, then correlation id, so the order is total
/// and repeatable.
void sort_by_start(std::vector<KernelRecord>& records);

}  // namespace twell
