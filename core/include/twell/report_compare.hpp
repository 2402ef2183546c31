// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "twell/report.hpp"

/// Baseline comparison of two reports (A = baseline, B = candidate): per-layer deltas of timings
/// and sparsity, end-to-end throughput, and what differs between the two runs besides the code.
namespace twell {

struct LayerComparison {
  int layer = 0;
  bool in_a = false, in_b = false;
  std::optional<double> density_a, density_b;
  std::optional<std::uint32_t> dead_a, dead_b;
  std::optional<double> dense_us_a, dense_us_b, twell_us_a, twell_us_b;
  std::optional<double> speedup_a, speedup_b;
  /// B over A; absent unless both were measured (and A is positive).
  std::optional<double> dense_ratio() const;
  std::optional<double> twell_ratio() const;
  std::optional<double> density_delta() const;  ///< B - A
};

struct EndToEndComparison {
  std::string path;
  std::optional<double> tokens_per_ms_a, tokens_per_ms_b;
  std::optional<double> ratio() const;  ///< B / A throughput
};

struct ReportComparison {
  std::string label_a, label_b;
  double threshold = 0.05;              ///< a time ratio beyond 1 ± threshold is a change, not noise
  std::vector<LayerComparison> layers;  ///< every layer in either report, by index
  std::vector<EndToEndComparison> end_to_end;
  /// Geometric means over layers timed in both, of B/A median time.
  std::optional<double> dense_time_ratio, twell_time_ratio;
  std::vector<int> slower_layers, faster_layers;  ///< by the TwELL time (dense when TwELL is absent)
  /// Differences that make the timing deltas mean less: device, clock, model, tokens, C...
  std::vector<std::string> caveats;
  /// FFN kernel variants (by name) that ran in one report and not in the other: the code that
  /// changed. Empty unless both reports describe their kernels (schema 1.3).
  std::vector<std::string> kernels_only_a, kernels_only_b;
};

ReportComparison compare_reports(const Report& a, const Report& b, const std::string& label_a,
                                 const std::string& label_b, double threshold = 0.05);

/// "FFN kernels that ran only in A: ..." and the same for B; none when the same kernels ran (or
/// either report does not describe its kernels).
std::vector<std::string> kernel_change_lines(const ReportComparison& comparison);

std::string comparison_markdown(const ReportComparison& comparison);
/// Plain text for a terminal: aligned columns, no markup.
std::string comparison_text(const ReportComparison& comparison);

}  // namespace twell
