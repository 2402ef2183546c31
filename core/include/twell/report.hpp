// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "twell/backend.hpp"
#include "twell/ffn_dispatch.hpp"
#include "twell/kernel_variant.hpp"
#include "twell/sparsity_stats.hpp"
#include "twell/tracer.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell {

inline constexpr const char* kReportSchemaId = "https://twellscope.dev/schema/report";
inline constexpr int kReportSchemaMajor = 1;
/// 1.1 added the dispatch break-even; 1.2 the per-layer dispatch's end-to-end forward ("dispatch")
/// and config.dispatchBreakEven; 1.3 the backend's kernel variants ("kernelVariants"); 1.4
/// config.twellKernels (the TwELL kernels asked for, when not auto); 1.5 each end-to-end forward's
/// occupied time ("occupied").
inline constexpr int kReportSchemaMinor = 5;

struct TimingStat {
  double median_us = 0, min_us = 0, max_us = 0;
  std::uint32_t count = 0;
  bool operator==(const TimingStat&) const = default;
};

/// One op of one path in one layer, e.g. ("twell", "gate_pack").
struct OpTiming {
  std::string op;
  TimingStat time;
  bool operator==(const OpTiming&) const = default;
};

struct PathTiming {
  std::string path;  ///< "dense" / "twell"
  TimingStat total;  ///< per repetition: sum of the path's kernels
  std::vector<OpTiming> ops;
  std::uint64_t overflow_rows = 0;  ///< TwELL rows that overflowed a tile (recomputed apart)
  bool operator==(const PathTiming&) const = default;
};

/// Per kernel name within (layer, path, op).
struct KernelStat {
  std::string name;
  int layer = -1;
  std::string path, op;
  TimingStat time;
  bool operator==(const KernelStat&) const = default;
};

struct LayerReport {
  int index = 0;
  LayerSparsityStats sparsity;
  std::vector<PathTiming> paths;
  std::optional<ErrorMetrics> twell_vs_dense;
  const PathTiming* find_path(const std::string& name) const;
  /// dense median / TwELL median, when both were timed.
  std::optional<double> speedup() const;
  bool operator==(const LayerReport&) const = default;
};

/// Below this share of its time kept busy (EndToEndPath::occupied_fraction), a forward is bound by
/// kernel launches and host work rather than by its kernels.
inline constexpr double kKernelBoundOccupiedFraction = 0.8;

struct EndToEndPath {
  std::string path;
  TimingStat forward;        ///< whole backbone forward, per repetition
  double tokens_per_ms = 0;  ///< tokens / median forward time
  /// Per repetition, the time at least one of the forward's kernels (or traced regions) ran: the
  /// forward less the gaps where the device waited for launches and host work. Absent in reports
  /// before 1.5.
  std::optional<TimingStat> occupied = std::nullopt;
  /// occupied's median over forward's; absent without both.
  std::optional<double> occupied_fraction() const;
  bool operator==(const EndToEndPath&) const = default;
};

struct ModelSummary {
  std::string source;  ///< checkpoint directory, or "demo"
  ModelConfig config;
  ActivationChoice activation;
  std::uint64_t parameters = 0;
  bool operator==(const ModelSummary&) const = default;
};

struct ProfileConfig {
  std::uint32_t batch = 1, sequence = 256;
  std::string token_source;  ///< "random(seed=1)" or a file name
  std::uint64_t seed = 1;
  std::vector<std::string> paths{"dense", "twell"};
  std::uint32_t compression = 8;
  bool highest_precision = false;
  std::uint32_t warmup = 2, repetitions = 5;
  std::vector<int> layers;  ///< empty: every layer
  bool flush_l2 = true;
  bool end_to_end = true;
  MapShape map_shape;
  /// The break-even density (a fraction) the per-layer dispatch applies in this run instead of the
  /// backend's, e.g. this model's own crossing from an earlier profile; empty: the backend's.
  std::optional<double> dispatch_break_even;
  /// The TwELL kernels the run asked the backend for (auto: the backend's fastest measured).
  TwellKernelRequest twell_kernels;
  bool operator==(const ProfileConfig&) const = default;
};

/// A finished profiling run, immutable once built. Serialised as versioned JSON (report_io.hpp).
struct Report {
  int schema_major = kReportSchemaMajor, schema_minor = kReportSchemaMinor;
  std::string tool_version, tool_commit;
  std::string created_utc;  ///< ISO 8601
  std::string host;
  DeviceInfo device;
  TracerInfo tracer;
  ModelSummary model;
  ProfileConfig config;
  std::vector<LayerReport> layers;
  std::vector<EndToEndPath> end_to_end;
  std::vector<KernelStat> kernels;
  /// The kernels the backend runs for the FFN ops, each described (empty in reports before 1.3).
  std::vector<KernelVariant> kernel_variants;
  std::vector<KernelRecord> timeline;  ///< every record of one timed repetition
  std::vector<std::string> warnings;
  /// The device's break-even density for this model's FFN at this run's token count, which the
  /// per-layer dispatch compares each layer's measured density with (absent in 1.0 reports).
  std::optional<FfnBreakEven> dispatch_break_even;
  /// The path the per-layer dispatch runs `layer` on; empty without a break-even.
  std::optional<FfnPath> dispatch_path(const LayerReport& layer) const;
  /// Indices of the layers the dispatch runs on `path` (none without a break-even).
  std::vector<int> dispatched_layers(FfnPath path) const;
  const EndToEndPath* find_end_to_end(const std::string& path) const;
  /// `path`'s end-to-end tokens/ms over dense's, when both were measured.
  std::optional<double> throughput_over_dense(const std::string& path) const;
  /// TwELL tokens/ms over dense tokens/ms, when both were measured.
  std::optional<double> end_to_end_speedup() const;
  /// The per-layer dispatch forward's tokens/ms over dense's, when both were measured.
  std::optional<double> dispatch_end_to_end_speedup() const;
  /// Whether the timings are CPU timings (the CPU backend, or a CPU-clock tracer): they say nothing of a
  /// GPU's speed or idle time.
  bool timed_on_cpu() const;
  /// Where a device run's end-to-end forward kept the device busy for under
  /// kKernelBoundOccupiedFraction of its time, every forward's share ("dense 42%, twell 40%"); else
  /// empty. Such forwards are bound by launches and host work, which their throughputs then measure.
  std::optional<std::string> launch_bound_forward_shares() const;
  bool operator==(const Report&) const = default;
};

}  // namespace twell
