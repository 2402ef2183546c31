// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "twell/report.hpp"
#include "twell/tracer.hpp"

/// Turns a tracer's records into the report's timing statistics.
///
/// Conventions, shared by every function here:
/// - Only attributed, non-warm-up records count (warm-ups pay lazy module loading and cold
///   caches; unattributed records belong to nobody). The timeline selection is the exception
///   only in that it also takes a repetition number.
/// - A sample is one repetition: the records with the same tag.repetition (within the same
///   phase/layer/path/op as the query) form one sample. A repetition in which a group launched
///   nothing gives no sample, so `count` is the number of repetitions it ran in.
/// - "Busy" time sums record durations, so it leaves out gaps between kernels; this is the
///   per-path and per-op time for per-kernel tracers (CUPTI) and equally for region tracers
///   (CUDA events, CPU clock), whose one record per region already spans it. Region tracers
///   record every open region, so callers must not nest tags within one (layer, path) or the
///   region would count twice.
/// - "Span" is max(end) - min(start) of a repetition's records: wall time including gaps, for
///   end-to-end forwards. "Occupied" time is the union of a repetition's record intervals: the span
///   less the gaps where nothing ran, with overlapping records (side streams) counted once.
/// - Statistics are median (mean of the two middle samples for an even count), min, max, count,
///   in microseconds.
/// - Inputs need not be sorted; outputs list groups in the order they first started.
namespace twell::timing {

/// Median/min/max/count of samples in microseconds; all zero when there are none.
TimingStat summarize(std::vector<double> samples_us);

/// Median over i of numerators[i] / denominators[i]: the ratio of two timings taken side by side in
/// each repetition, so that drift across a run (clocks under a power cap, other tenants) cancels in
/// every pair instead of landing on whichever contender was timed later. 0 when there are no pairs;
/// throws twell::Error (internal) when the counts differ or a denominator is not positive.
double median_of_ratios(const std::vector<double>& numerators, const std::vector<double>& denominators);

/// Which records a query looks at; an empty field matches anything.
struct RecordFilter {
  std::optional<std::string> phase = std::nullopt;
  std::optional<int> layer = std::nullopt;
  std::optional<std::string> path = std::nullopt;
  std::optional<std::string> op = std::nullopt;
  /// Attributed, not a warm-up, and every set field equal.
  bool matches(const KernelRecord& record) const;
};

/// Per repetition number: the summed duration (µs) of the matching records.
std::map<int, double> busy_us_per_repetition(const std::vector<KernelRecord>& records,
                                             const RecordFilter& filter);
/// Per repetition number: max(end) - min(start) (µs) of the matching records.
std::map<int, double> span_us_per_repetition(const std::vector<KernelRecord>& records,
                                             const RecordFilter& filter);

/// Per repetition number: the length (µs) of the union of the matching records' intervals.
std::map<int, double> occupied_us_per_repetition(const std::vector<KernelRecord>& records,
                                                 const RecordFilter& filter);

/// Statistics of busy_us_per_repetition.
TimingStat busy_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter);
/// Statistics of span_us_per_repetition: end-to-end forward time, e.g.
/// span_stat(records, {.phase = "end_to_end", .path = "twell"}).
TimingStat span_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter);
/// Statistics of occupied_us_per_repetition: how long a forward kept the device working.
TimingStat occupied_stat(const std::vector<KernelRecord>& records, const RecordFilter& filter);

/// One PathTiming per path that `layer` ran in `phase`: the path's busy total per repetition
/// and one OpTiming per op. overflow_rows is left at 0 for the caller to fill.
std::vector<PathTiming> path_timings(const std::vector<KernelRecord>& records, int layer,
                                     const std::string& phase = "layer_ffn");

/// One KernelStat per kernel name within each (layer, path, op) of `phase`; a sample is the
/// summed time of that name in one repetition (a kernel launched twice in an op counts once,
/// with both durations).
std::vector<KernelStat> kernel_stats(const std::vector<KernelRecord>& records,
                                     const std::string& phase = "layer_ffn");

/// The lowest repetition number among matching records, if any.
std::optional<int> first_timed_repetition(const std::vector<KernelRecord>& records,
                                          const RecordFilter& filter = {});

/// The matching records of one repetition, ordered by start time: the report's timeline.
std::vector<KernelRecord> records_of_repetition(const std::vector<KernelRecord>& records, int repetition,
                                                const RecordFilter& filter = {});

}  // namespace twell::timing
