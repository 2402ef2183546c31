// SPDX-License-Identifier: GPL-3.0-or-later
#include "csv_writer.hpp"
#include "twell/report_export.hpp"

namespace twell {
namespace {

const CapacityCheck* capacity_at(const LayerSparsityStats& stats, std::uint32_t compression) {
  for (const auto& check : stats.capacity)
    if (check.compression == compression) return &check;
  return nullptr;
}

std::optional<double> median_of(const LayerReport& layer, const char* path) {
  const PathTiming* timing = layer.find_path(path);
  if (!timing || timing->total.count == 0) return std::nullopt;
  return timing->total.median_us;
}

}  // namespace

std::string export_layers_csv(const Report& report) {
  csv::Writer out;
  out.header({"layer",         "density",       "nnz_mean",    "nnz_p99",  "nnz_max",     "dead_neurons",
              "tile_max",      "overflow_rows", "dense_us",    "twell_us", "speedup",     "rel_error",
              "nnz_p50",       "nnz_p90",       "tokens",      "neurons",  "compression", "tile_capacity",
              "max_abs_error", "cosine",        "timing_clock"});
  const std::uint32_t compression = report.config.compression;
  for (const auto& layer : report.layers) {
    const LayerSparsityStats& s = layer.sparsity;
    const CapacityCheck* capacity = capacity_at(s, compression);
    const auto& errors = layer.twell_vs_dense;
    out.field(layer.index);
    out.field(s.density);
    out.field(s.nnz_per_token.mean);
    out.field(s.nnz_per_token.p99);
    out.field(s.nnz_per_token.max);
    out.field(s.dead_neurons);
    out.field(s.tile_max);
    out.field(capacity ? std::to_string(capacity->overflow_rows) : std::string());
    out.field(median_of(layer, "dense"));
    out.field(median_of(layer, "twell"));
    out.field(layer.speedup());
    out.field(errors ? std::optional<double>(errors->rel_frobenius) : std::nullopt);
    out.field(s.nnz_per_token.p50);
    out.field(s.nnz_per_token.p90);
    out.field(std::to_string(s.tokens));
    out.field(s.neurons);
    out.field(compression);
    out.field(twell_tile_capacity(compression));
    out.field(errors ? std::optional<double>(errors->max_abs) : std::nullopt);
    out.field(errors ? std::optional<double>(errors->cosine) : std::nullopt);
    out.field(report.tracer.clock);
    out.end_row();
  }
  return out.text();
}

std::string export_kernels_csv(const Report& report) {
  csv::Writer out;
  out.header({"layer", "path", "op", "kernel", "count", "median_us", "min_us", "max_us", "timing_clock"});
  for (const auto& kernel : report.kernels) {
    out.field(kernel.layer);
    out.field(kernel.path);
    out.field(kernel.op);
    out.field(kernel.name);
    out.field(kernel.time.count);
    out.field(kernel.time.median_us);
    out.field(kernel.time.min_us);
    out.field(kernel.time.max_us);
    out.field(report.tracer.clock);
    out.end_row();
  }
  return out.text();
}

std::optional<ExportFormat> export_format_from_string(const std::string& name) {
  if (name == "csv") return ExportFormat::LayersCsv;
  if (name == "kernels-csv") return ExportFormat::KernelsCsv;
  if (name == "trace") return ExportFormat::ChromeTrace;
  if (name == "markdown") return ExportFormat::Markdown;
  return std::nullopt;
}

const char* to_string(ExportFormat format) noexcept {
  switch (format) {
    case ExportFormat::LayersCsv:
      return "csv";
    case ExportFormat::KernelsCsv:
      return "kernels-csv";
    case ExportFormat::ChromeTrace:
      return "trace";
    case ExportFormat::Markdown:
      return "markdown";
  }
  return "csv";
}

std::string export_report(const Report& report, ExportFormat format) {
  switch (format) {
    case ExportFormat::LayersCsv:
      return export_layers_csv(report);
    case ExportFormat::KernelsCsv:
      return export_kernels_csv(report);
    case ExportFormat::ChromeTrace:
      return export_chrome_trace(report);
    case ExportFormat::Markdown:
      return export_markdown(report);
  }
  return {};
}

}  // namespace twell
