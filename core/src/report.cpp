// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/report.hpp"

namespace twell {

const PathTiming* LayerReport::find_path(const std::string& name) const {
  for (const auto& timing : paths)
    if (timing.path == name) return &timing;
  return nullptr;
}

std::optional<double> LayerReport::speedup() const {
  const PathTiming* dense = find_path("dense");
  const PathTiming* sparse = find_path("twell");
  if (!dense || !sparse || dense->total.count == 0 || sparse->total.count == 0 ||
      sparse->total.median_us <= 0)
    return std::nullopt;
  return dense->total.median_us / sparse->total.median_us;
}

std::optional<double> EndToEndPath::occupied_fraction() const {
  if (!occupied || occupied->count == 0 || forward.count == 0 || !(forward.median_us > 0))
    return std::nullopt;
  return occupied->median_us / forward.median_us;
}

const EndToEndPath* Report::find_end_to_end(const std::string& path) const {
  for (const auto& entry : end_to_end)
    if (entry.path == path) return &entry;
  return nullptr;
}

std::optional<double> Report::throughput_over_dense(const std::string& path) const {
  const EndToEndPath* dense = find_end_to_end("dense");
  const EndToEndPath* other = find_end_to_end(path);
  if (!dense || !other || dense->tokens_per_ms <= 0 || other->tokens_per_ms <= 0) return std::nullopt;
  return other->tokens_per_ms / dense->tokens_per_ms;
}

std::optional<double> Report::end_to_end_speedup() const {
  return throughput_over_dense("twell");
}

std::optional<double> Report::dispatch_end_to_end_speedup() const {
  return throughput_over_dense(kDispatchForwardPath);
}

std::optional<FfnPath> Report::dispatch_path(const LayerReport& layer) const {
  if (!dispatch_break_even) return std::nullopt;
  return choose_ffn_path(layer.sparsity.density, *dispatch_break_even);
}

std::vector<int> Report::dispatched_layers(FfnPath path) const {
  std::vector<int> out;
  for (const auto& layer : layers)
    if (dispatch_path(layer) == path) out.push_back(layer.index);
  return out;
}

}  // namespace twell
