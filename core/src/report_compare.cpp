// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/report_compare.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "text_format.hpp"
#include "twell/report_views.hpp"

namespace twell {
namespace {

std::optional<double> ratio_of(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b || !(*a > 0) || !std::isfinite(*b)) return std::nullopt;
  return *b / *a;
}

std::optional<double> path_median(const LayerReport& layer, const char* path) {
  const PathTiming* timing = layer.find_path(path);
  if (!timing || timing->total.count == 0) return std::nullopt;
  return timing->total.median_us;
}

std::optional<double> geometric_mean(const std::vector<double>& ratios) {
  if (ratios.empty()) return std::nullopt;
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  return std::exp(log_sum / double(ratios.size()));
}

// Names, not whole variants: a description reworded between versions is not a code change.
void add_kernel_changes(const Report& a, const Report& b, ReportComparison& out) {
  if (a.kernel_variants.empty() || b.kernel_variants.empty()) return;
  auto names_that_ran = [](const Report& report) {
    std::set<std::string> names;
    for (const KernelVariant& variant : views::kernel_variants_that_ran(report)) names.insert(variant.name);
    return names;
  };
  const std::set<std::string> ran_a = names_that_ran(a), ran_b = names_that_ran(b);
  std::set_difference(ran_a.begin(), ran_a.end(), ran_b.begin(), ran_b.end(),
                      std::back_inserter(out.kernels_only_a));
  std::set_difference(ran_b.begin(), ran_b.end(), ran_a.begin(), ran_a.end(),
                      std::back_inserter(out.kernels_only_b));
}

void add_caveats(const Report& a, const Report& b, ReportComparison& out) {
  auto differ = [&](const std::string& what, const std::string& value_a, const std::string& value_b) {
    if (value_a != value_b)
      out.caveats.push_back(what + " differs: " + value_a + " (A) vs " + value_b + " (B)");
  };
  differ("device", a.device.name + " [" + a.device.backend + "]",
         b.device.name + " [" + b.device.backend + "]");
  if (a.tracer.clock != b.tracer.clock)
    out.caveats.push_back("timing clocks differ: A has " + a.tracer.clock + " timings, B has " +
                          b.tracer.clock + " timings; their time deltas compare different things");
  differ("tracer", a.tracer.name, b.tracer.name);
  const ModelConfig& ma = a.model.config;
  const ModelConfig& mb = b.model.config;
  auto shape = [](const ModelConfig& m) {
    return m.model_type + " " + std::to_string(m.num_hidden_layers) + " layers, hidden " +
           std::to_string(m.hidden_size) + ", FFN " + std::to_string(m.intermediate_size);
  };
  differ("model", shape(ma), shape(mb));
  differ("model source", a.model.source, b.model.source);
  differ("activation", to_string(a.model.activation.activation), to_string(b.model.activation.activation));
  differ("tokens",
         std::to_string(a.config.batch) + " x " + std::to_string(a.config.sequence) + " " +
             a.config.token_source,
         std::to_string(b.config.batch) + " x " + std::to_string(b.config.sequence) + " " +
             b.config.token_source);
  differ("compression factor", "C=" + std::to_string(a.config.compression),
         "C=" + std::to_string(b.config.compression));
  differ("TwELL kernels", to_string(a.config.twell_kernels), to_string(b.config.twell_kernels));
  // The dispatch forwards of two reports compare different layer choices under different thresholds.
  auto break_even = [](const Report& r) {
    return r.dispatch_break_even ? text::percent(r.dispatch_break_even->density, 2) : std::string("none");
  };
  differ("dispatch break-even", break_even(a), break_even(b));
  // A change in a launch-bound forward's throughput says little about the kernels.
  for (const auto& [report, label] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
    if (const std::optional<std::string> shares = report->launch_bound_forward_shares())
      out.caveats.push_back(std::string("end-to-end forwards of ") + label +
                            " kept the device busy for only part of their time (" + *shares +
                            "): their throughputs measure launches and host work as much as kernels");
}

}  // namespace

std::optional<double> LayerComparison::dense_ratio() const {
  return ratio_of(dense_us_a, dense_us_b);
}
std::optional<double> LayerComparison::twell_ratio() const {
  return ratio_of(twell_us_a, twell_us_b);
}
std::optional<double> LayerComparison::density_delta() const {
  if (!density_a || !density_b) return std::nullopt;
  return *density_b - *density_a;
}
std::optional<double> EndToEndComparison::ratio() const {
  return ratio_of(tokens_per_ms_a, tokens_per_ms_b);
}

ReportComparison compare_reports(const Report& a, const Report& b, const std::string& label_a,
                                 const std::string& label_b, double threshold) {
  ReportComparison out;
  out.label_a = label_a;
  out.label_b = label_b;
  out.threshold = threshold;

  std::map<int, LayerComparison> by_index;
  auto fill = [&](const Report& report, bool is_a) {
    for (const auto& layer : report.layers) {
      LayerComparison& c = by_index[layer.index];
      c.layer = layer.index;
      (is_a ? c.in_a : c.in_b) = true;
      (is_a ? c.density_a : c.density_b) = layer.sparsity.density;
      (is_a ? c.dead_a : c.dead_b) = layer.sparsity.dead_neurons;
      (is_a ? c.dense_us_a : c.dense_us_b) = path_median(layer, "dense");
      (is_a ? c.twell_us_a : c.twell_us_b) = path_median(layer, "twell");
      (is_a ? c.speedup_a : c.speedup_b) = layer.speedup();
    }
  };
  fill(a, true);
  fill(b, false);

  std::vector<double> dense_ratios, twell_ratios;
  std::vector<int> only_a, only_b;
  for (auto& [index, c] : by_index) {
    if (!c.in_b) only_a.push_back(index);
    if (!c.in_a) only_b.push_back(index);
    if (const auto r = c.dense_ratio()) dense_ratios.push_back(*r);
    if (const auto r = c.twell_ratio()) twell_ratios.push_back(*r);
    const auto r = c.twell_ratio() ? c.twell_ratio() : c.dense_ratio();
    if (r && *r > 1.0 + threshold) out.slower_layers.push_back(index);
    if (r && *r < 1.0 - threshold) out.faster_layers.push_back(index);
    out.layers.push_back(c);
  }
  out.dense_time_ratio = geometric_mean(dense_ratios);
  out.twell_time_ratio = geometric_mean(twell_ratios);

  for (const char* path : {"dense", "twell", kDispatchForwardPath}) {
    const EndToEndPath* ea = a.find_end_to_end(path);
    const EndToEndPath* eb = b.find_end_to_end(path);
    if (!ea && !eb) continue;
    EndToEndComparison e;
    e.path = path;
    if (ea) e.tokens_per_ms_a = ea->tokens_per_ms;
    if (eb) e.tokens_per_ms_b = eb->tokens_per_ms;
    out.end_to_end.push_back(e);
  }

  add_caveats(a, b, out);
  add_kernel_changes(a, b, out);
  auto list = [](const std::vector<int>& layers) {
    std::string text;
    for (std::size_t i = 0; i < layers.size(); ++i) text += (i ? ", " : "") + std::to_string(layers[i]);
    return text;
  };
  if (!only_a.empty()) out.caveats.push_back("layers only in A: " + list(only_a));
  if (!only_b.empty()) out.caveats.push_back("layers only in B: " + list(only_b));
  return out;
}

}  // namespace twell
