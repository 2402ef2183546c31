// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/report.hpp"

#include "text_format.hpp"

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

bool Report::timed_on_cpu() const {
  return device.backend == "cpu" || tracer.clock == "cpu";
}

std::optional<std::string> Report::launch_bound_forward_shares() const {
  if (timed_on_cpu()) return std::nullopt;  // no device to leave idle
  std::string shares;
  bool launch_bound = false;
  for (const auto& forward : end_to_end) {
    const std::optional<double> fraction = forward.occupied_fraction();
    if (!fraction) continue;
    launch_bound = launch_bound || *fraction < kKernelBoundOccupiedFraction;
    shares += (shares.empty() ? "" : ", ") + forward.path + " " + text::percent(*fraction, 0);
  }
  if (!launch_bound) return std::nullopt;
  return shares;
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
