// SPDX-License-Identifier: GPL-3.0-or-later
#include <optional>
#include <string>
#include <vector>

#include "text_format.hpp"
#include "twell/report_views.hpp"
#include "twell/session.hpp"

namespace twell {
namespace {

std::string join_layers(const std::vector<int>& layers) {
  std::string out;
  const std::size_t shown = layers.size() <= 16 ? layers.size() : 15;
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + std::to_string(layers[i]);
  if (shown < layers.size()) out += " and " + std::to_string(layers.size() - shown) + " more";
  return out;
}

const CapacityCheck* capacity_at(const LayerSparsityStats& stats, std::uint32_t compression) {
  for (const auto& check : stats.capacity)
    if (check.compression == compression) return &check;
  return nullptr;
}

/// Overflowing rows are recomputed densely, so TwELL stays correct but loses speed there; the
/// user can pick a smaller C (more capacity per tile).
void overflow_warning(const Report& report, std::vector<std::string>& out) {
  const std::uint32_t compression = report.config.compression;
  std::vector<int> layers;
  std::uint64_t rows = 0;
  bool smaller_c_would_hold = false;
  std::uint32_t safe_compression = 0;
  for (const auto& layer : report.layers) {
    const CapacityCheck* check = capacity_at(layer.sparsity, compression);
    if (!check || check->overflow_rows == 0) continue;
    layers.push_back(layer.index);
    rows += check->overflow_rows;
  }
  if (layers.empty()) return;
  for (std::uint32_t candidate : kCompressionFactors) {
    if (candidate >= compression) continue;
    bool holds = true;
    for (const auto& layer : report.layers) {
      const CapacityCheck* check = capacity_at(layer.sparsity, candidate);
      holds = holds && check && check->overflow_rows == 0;
    }
    if (holds) {
      smaller_c_would_hold = true;
      safe_compression = candidate;
      break;
    }
  }
  std::string text = "TwELL tile capacity overflows at C=" + std::to_string(compression) + " (" +
                     std::to_string(twell_tile_capacity(compression)) +
                     " non-zeros per 256-neuron tile) in layer" + (layers.size() > 1 ? "s " : " ") +
                     join_layers(layers) + ": " + std::to_string(rows) +
                     " token rows in all are recomputed densely, which costs TwELL speed there";
  if (smaller_c_would_hold) text += "; no layer overflows at C=" + std::to_string(safe_compression);
  out.push_back(std::move(text));
}

void break_even_warning(const Report& report, std::vector<std::string>& out) {
  std::vector<int> slower;
  std::size_t compared = 0;
  for (const auto& layer : report.layers) {
    const auto speedup = layer.speedup();
    if (!speedup) continue;
    ++compared;
    if (*speedup < 1.0) slower.push_back(layer.index);
  }
  if (slower.empty()) return;
  out.push_back("TwELL is slower than dense (below break-even) in " + std::to_string(slower.size()) + " of " +
                std::to_string(compared) + " layers: layer" + (slower.size() > 1 ? "s " : " ") +
                join_layers(slower));
}

/// Layers whose density passes the device's break-even run dense in a production forward; say
/// which, on what the threshold rests, and where this run's own timings disagree with it.
void dispatch_warning(const Report& report, std::vector<std::string>& out) {
  if (!report.dispatch_break_even) return;
  std::vector<int> dense, dense_yet_twell_faster, twell_yet_slower;
  for (const auto& layer : report.layers) {
    const std::optional<FfnPath> path = report.dispatch_path(layer);
    const std::optional<double> speedup = layer.speedup();
    if (path == FfnPath::Dense) dense.push_back(layer.index);
    if (!path || !speedup) continue;
    if (*path == FfnPath::Dense && *speedup > 1.0) dense_yet_twell_faster.push_back(layer.index);
    if (*path == FfnPath::Twell && *speedup < 1.0) twell_yet_slower.push_back(layer.index);
  }
  const FfnBreakEven& break_even = *report.dispatch_break_even;
  const std::string threshold =
      "the break-even of " + text::percent(break_even.density, 2) + ", " + break_even.basis;
  auto layers = [](const std::vector<int>& list) {
    return std::string("layer") + (list.size() > 1 ? "s " : " ") + join_layers(list);
  };
  if (!dense.empty()) {
    std::string warning = "the per-layer dispatch runs " + std::to_string(dense.size()) + " of " +
                          std::to_string(report.layers.size()) + " layers dense (" + layers(dense) +
                          "): their density is at or past " + threshold;
    if (!dense_yet_twell_faster.empty())
      warning += "; TwELL measured faster in " + layers(dense_yet_twell_faster) +
                 " in this run, so for this model the threshold is conservative";
    out.push_back(std::move(warning));
  }
  if (!twell_yet_slower.empty())
    out.push_back("the per-layer dispatch runs " + layers(twell_yet_slower) + " on TwELL, below " +
                  threshold + ", but TwELL measured slower than dense there in this run");
  if (dense_yet_twell_faster.empty() && twell_yet_slower.empty()) return;
  // Where TwELL's relative cost grows with density, as it should, the line fitted through this
  // run's layers says where this model crosses: a threshold the user can set for the next run.
  const views::BreakEven fit = views::estimate_break_even(report);
  if (fit.density && fit.ratio_slope > 0)
    out.back() += "; this run's layer timings cross at about " + text::percent(*fit.density, 2) +
                  " (a fit over " + std::to_string(fit.points) +
                  " layers), a break-even to set for later runs (--dispatch-break-even, or the GUI's "
                  "\"Dispatch below\")";
}

/// A small batch or model leaves the device waiting between launches; the end-to-end throughputs
/// then compare the host's launch work as much as the kernels, which the user should know before
/// reading a speedup from them.
void idle_forward_warning(const Report& report, std::vector<std::string>& out) {
  const std::optional<std::string> shares = report.launch_bound_forward_shares();
  if (!shares) return;
  out.push_back("the end-to-end forwards kept the device busy for only part of their time (" + *shares +
                "): the rest went to kernel launches and host work, so their throughputs and ratios "
                "measure those as much as the kernels; profile more tokens (--batch, --seq) for "
                "kernel-bound figures");
}

}  // namespace

std::vector<std::string> derive_report_warnings(const Report& report) {
  std::vector<std::string> out;
  if (report.timed_on_cpu())
    out.push_back("CPU run: timings are CPU timings (" + report.tracer.name + " on " +
                  (report.device.name.empty() ? std::string("the CPU") : report.device.name) +
                  "), not GPU kernel timings; they do not predict GPU speedups");
  if (!report.tracer.fallback_reason.empty())
    out.push_back(
        "timed with the " + report.tracer.name +
        " tracer instead of CUPTI: " + report.tracer.fallback_reason +
        (report.tracer.per_kernel ? "" : "; times cover whole regions, without a per-kernel breakdown"));
  overflow_warning(report, out);
  break_even_warning(report, out);
  dispatch_warning(report, out);
  idle_forward_warning(report, out);
  return out;
}

}  // namespace twell
