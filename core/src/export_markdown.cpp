// SPDX-License-Identifier: GPL-3.0-or-later
#include <algorithm>

#include "markdown_table.hpp"
#include "text_format.hpp"
#include "twell/report_export.hpp"
#include "twell/report_views.hpp"

namespace twell {
namespace {

std::string optional_fixed(const std::optional<double>& value, int digits) {
  return value ? text::fixed(*value, digits) : std::string("–");
}

std::string median_us(const LayerReport& layer, const char* path) {
  const PathTiming* timing = layer.find_path(path);
  return timing && timing->total.count > 0 ? text::fixed(timing->total.median_us, 1) : std::string("–");
}

std::uint64_t overflow_rows_at(const LayerSparsityStats& stats, std::uint32_t compression) {
  for (const auto& check : stats.capacity)
    if (check.compression == compression) return check.overflow_rows;
  return 0;
}

std::string device_line(const DeviceInfo& d) {
  std::string line = d.name.empty() ? std::string("unknown device") : d.name;
  line += " (" + d.backend;
  if (!d.compute_capability.empty()) line += ", compute capability " + d.compute_capability;
  if (d.multiprocessor_count > 0)
    line += ", " + std::to_string(d.multiprocessor_count) + (d.backend == "cpu" ? " threads" : " SMs");
  line += ")";
  if (!d.driver_version.empty()) line += ", driver " + d.driver_version;
  if (!d.runtime_version.empty()) line += ", runtime " + d.runtime_version;
  if (!d.kernel_family.empty()) line += ", kernels " + d.kernel_family;
  return line;
}

std::string timing_line(const TracerInfo& t) {
  std::string line = t.name + (t.clock == "cpu" ? ": CPU timings (wall clock of CPU work)" : ": GPU timings");
  line += t.per_kernel ? ", per kernel" : ", per tagged region";
  if (!t.fallback_reason.empty()) line += "; fallback because " + t.fallback_reason;
  return line;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

}  // namespace

std::string export_markdown(const Report& report) {
  const ModelConfig& m = report.model.config;
  const ProfileConfig& c = report.config;
  std::string out = "# twellscope report: " + markdown::cell(report.model.source) + "\n\n";

  std::vector<std::vector<std::string>> facts = {
      {"created", report.created_utc},
      {"tool", "twellscope " + report.tool_version + " (" + report.tool_commit + ")"},
      {"host", report.host},
      {"device", device_line(report.device)},
      {"timing", timing_line(report.tracer)},
      {"model", m.model_type + ", " + std::to_string(m.num_hidden_layers) + " layers, hidden " +
                    std::to_string(m.hidden_size) + ", FFN " + std::to_string(m.intermediate_size) + ", " +
                    std::to_string(report.model.parameters) + " parameters, " + m.dtype},
      {"activation",
       std::string(to_string(report.model.activation.activation)) +
           (report.model.activation.reason.empty() ? "" : " (" + report.model.activation.reason + ")")},
      {"tokens", std::to_string(c.batch) + " x " + std::to_string(c.sequence) + " from " + c.token_source},
      {"run", "paths " + join(c.paths, ", ") + "; C=" + std::to_string(c.compression) + "; " +
                  (c.twell_kernels.is_auto() ? "" : "TwELL kernels " + to_string(c.twell_kernels) + "; ") +
                  std::to_string(c.warmup) + " warm-up + " + std::to_string(c.repetitions) +
                  " timed repetitions (median)" + (c.flush_l2 ? "; L2 flushed between repetitions" : "")},
  };
  out += markdown::table({"", ""}, facts) + "\n";

  if (!report.warnings.empty()) {
    out += "## Warnings\n\n";
    for (const auto& warning : report.warnings) out += "- " + markdown::cell(warning) + "\n";
    out += "\n";
  }

  if (!report.end_to_end.empty()) {
    out += "## End to end\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : report.end_to_end) {
      const std::optional<double> occupied = e.occupied_fraction();
      rows.push_back({e.path, text::fixed(e.forward.median_us / 1000.0, 3),
                      text::fixed(e.forward.min_us / 1000.0, 3), text::fixed(e.forward.max_us / 1000.0, 3),
                      std::to_string(e.forward.count), text::fixed(e.tokens_per_ms, 2),
                      occupied ? text::percent(*occupied, 0) : "n/a"});
    }
    out += markdown::table(
        {"path", "forward median (ms)", "min (ms)", "max (ms)", "runs", "tokens/ms", "device busy"}, rows,
        {false, true, true, true, true, true, true});
    if (const auto speedup = report.end_to_end_speedup())
      out += "\nTwELL / dense throughput: **" + text::fixed(*speedup, 3) + "x**\n";
    if (const auto speedup = report.dispatch_end_to_end_speedup())
      out += "\nPer-layer dispatch / dense throughput: **" + text::fixed(*speedup, 3) + "x**\n";
    out += "\n";
  }

  out += "## Layers\n\n";
  std::vector<std::vector<std::string>> rows;
  std::size_t below_break_even = 0, compared = 0;
  for (const auto& layer : report.layers) {
    const LayerSparsityStats& s = layer.sparsity;
    const auto speedup = layer.speedup();
    if (speedup) {
      ++compared;
      if (*speedup < 1.0) ++below_break_even;
    }
    rows.push_back({std::to_string(layer.index), text::percent(s.density, 2),
                    text::fixed(s.nnz_per_token.mean, 1), text::fixed(s.nnz_per_token.p99, 0),
                    text::fixed(s.nnz_per_token.max, 0),
                    std::to_string(s.dead_neurons) + " / " + std::to_string(s.neurons),
                    std::to_string(s.tile_max), std::to_string(overflow_rows_at(s, c.compression)),
                    median_us(layer, "dense"), median_us(layer, "twell"), optional_fixed(speedup, 2),
                    layer.twell_vs_dense ? text::scientific(layer.twell_vs_dense->rel_frobenius, 2) : "–"});
  }
  const std::string unit = report.tracer.clock == "cpu" ? " (CPU µs)" : " (µs)";
  out += markdown::table({"layer", "density", "nnz/token", "p99", "max", "dead neurons", "tile max",
                          "overflow rows (C=" + std::to_string(c.compression) + ")", "dense" + unit,
                          "TwELL" + unit, "speedup", "rel. error"},
                         rows, {true, true, true, true, true, true, true, true, true, true, true, true});
  if (compared > 0)
    out += "\nTwELL is faster than dense in " + std::to_string(compared - below_break_even) + " of " +
           std::to_string(compared) + " layers.\n";
  if (report.dispatch_break_even) {
    const FfnBreakEven& b = *report.dispatch_break_even;
    out += "\nThe per-layer dispatch runs TwELL in " +
           std::to_string(report.dispatched_layers(FfnPath::Twell).size()) + " of " +
           std::to_string(report.layers.size()) + " layers: those below the break-even of " +
           text::percent(b.density, 2) + " (" + markdown::cell(b.basis) + ").\n";
  }

  if (const auto variants = views::kernel_variants_that_ran(report); !variants.empty()) {
    out += "\n## FFN kernels\n\n";
    std::vector<std::vector<std::string>> kernel_rows;
    for (const KernelVariant& v : variants)
      kernel_rows.push_back({v.name, v.path, v.op, v.architectures, v.description});
    out += markdown::table({"kernel", "path", "op", "runs on", "what it does"}, kernel_rows);
  }
  return out;
}

}  // namespace twell
