// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/report_views.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "twell/error.hpp"
#include "twell/session.hpp"

namespace twell::views {
namespace {

std::optional<double> path_median_us(const LayerReport& layer, const char* path) {
  const PathTiming* timing = layer.find_path(path);
  if (!timing || timing->total.count == 0) return std::nullopt;
  return timing->total.median_us;
}

const CapacityCheck* capacity_at(const LayerSparsityStats& stats, std::uint32_t compression) {
  for (const CapacityCheck& check : stats.capacity)
    if (check.compression == compression) return &check;
  return nullptr;
}

std::optional<double> difference(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

void add_unique(std::vector<std::string>& list, std::string text) {
  if (std::find(list.begin(), list.end(), text) == list.end()) list.push_back(std::move(text));
}

}  // namespace

std::vector<LayerRow> layer_rows(const Report& report) {
  std::vector<LayerRow> rows;
  rows.reserve(report.layers.size());
  const std::uint32_t compression = report.config.compression;
  for (const LayerReport& layer : report.layers) {
    const LayerSparsityStats& s = layer.sparsity;
    LayerRow row;
    row.layer = layer.index;
    row.density = s.density;
    row.nnz_per_token = s.nnz_per_token;
    row.neurons = s.neurons;
    row.dead_neurons = s.dead_neurons;
    row.dead_fraction = s.neurons ? double(s.dead_neurons) / s.neurons : 0.0;
    row.tile_max = s.tile_max;
    row.capacity = twell_tile_capacity(compression);
    if (const CapacityCheck* check = capacity_at(s, compression)) {
      row.capacity = check->capacity;
      row.overflow_rows = check->overflow_rows;
    }
    if (const PathTiming* twell = layer.find_path("twell"); twell && twell->overflow_rows)
      row.overflow_rows = std::max(row.overflow_rows, twell->overflow_rows);
    row.dense_us = path_median_us(layer, "dense");
    row.twell_us = path_median_us(layer, "twell");
    row.speedup = layer.speedup();
    row.error = layer.twell_vs_dense;
    row.dispatch = report.dispatch_path(layer);
    rows.push_back(row);
  }
  return rows;
}

Overview overview(const Report& report) {
  Overview result;
  double nonzeros = 0, cells = 0;
  for (const LayerRow& row : layer_rows(report)) {
    const LayerReport& layer = *std::find_if(report.layers.begin(), report.layers.end(),
                                             [&](const LayerReport& l) { return l.index == row.layer; });
    const double layer_cells = double(layer.sparsity.tokens) * layer.sparsity.neurons;
    nonzeros += row.density * layer_cells;
    cells += layer_cells;
    result.dead_neurons += row.dead_neurons;
    result.neurons += row.neurons;
    if (row.speedup) {
      ++result.layers_timed;
      if (*row.speedup < 1.0) ++result.layers_twell_slower;
    }
  }
  result.overall_density = cells > 0 ? nonzeros / cells : 0.0;
  if (const EndToEndPath* dense = report.find_end_to_end("dense")) {
    result.dense_tokens_per_ms = dense->tokens_per_ms;
    result.dense_occupied = dense->occupied_fraction();
  }
  if (const EndToEndPath* twell = report.find_end_to_end("twell")) {
    result.twell_tokens_per_ms = twell->tokens_per_ms;
    result.twell_occupied = twell->occupied_fraction();
  }
  result.end_to_end_speedup = report.end_to_end_speedup();
  if (const EndToEndPath* dispatch = report.find_end_to_end(kDispatchForwardPath)) {
    result.dispatch_tokens_per_ms = dispatch->tokens_per_ms;
    result.dispatch_occupied = dispatch->occupied_fraction();
  }
  result.dispatch_speedup = report.dispatch_end_to_end_speedup();

  // The session stores these warnings in the report; a report built elsewhere (an older writer,
  // a test) gets them derived the same way.
  result.warnings = report.warnings;
  for (std::string& warning : derive_report_warnings(report)) add_unique(result.warnings, std::move(warning));
  return result;
}

Grid firing_rate_grid(const Report& report) {
  Grid grid;
  grid.rows = static_cast<std::uint32_t>(report.layers.size());
  for (const LayerReport& layer : report.layers)
    grid.cols = std::max<std::uint32_t>(grid.cols,
                                        static_cast<std::uint32_t>(layer.sparsity.neuron_fire_counts.size()));
  grid.values.assign(std::size_t(grid.rows) * grid.cols, 0.0);
  grid.flagged.assign(grid.values.size(), 1);
  for (std::uint32_t r = 0; r < grid.rows; ++r) {
    const LayerSparsityStats& s = report.layers[r].sparsity;
    for (std::size_t n = 0; n < s.neuron_fire_counts.size(); ++n) {
      const std::uint32_t fires = s.neuron_fire_counts[n];
      const std::size_t at = std::size_t(r) * grid.cols + n;
      grid.values[at] = s.tokens ? double(fires) / double(s.tokens) : 0.0;
      grid.flagged[at] = fires == 0;
    }
  }
  return grid;
}

Grid token_map_grid(const TokenNeuronMap& map) {
  if (map.cells.size() != std::size_t(map.rows) * map.cols)
    throw Error(Error::Kind::InvalidInput, "token map: " + std::to_string(map.cells.size()) + " cells for " +
                                               std::to_string(map.rows) + " x " + std::to_string(map.cols));
  Grid grid;
  grid.rows = map.rows;
  grid.cols = map.cols;
  grid.values.resize(map.cells.size());
  grid.flagged.resize(map.cells.size());
  for (std::size_t i = 0; i < map.cells.size(); ++i) {
    const std::uint8_t cell = map.cells[i];
    // Inverse of encode_map_cell: 0 is "nothing fired", 1..255 map linearly onto (0, 1].
    grid.values[i] = cell == 0 ? 0.0 : std::max(double(cell - 1) / 254.0, 1.0 / 254.0);
    grid.flagged[i] = cell == 0;
  }
  return grid;
}

MapCellSize token_map_cell_size(const TokenNeuronMap& map) {
  MapCellSize size;
  if (map.rows) size.tokens = std::max(1u, (map.tokens + map.rows - 1) / map.rows);
  if (map.cols) size.neurons = std::max(1u, (map.neurons + map.cols - 1) / map.cols);
  return size;
}

PooledGrid pool_max(const Grid& source, Window window, std::uint32_t max_rows, std::uint32_t max_cols) {
  window.row_end = std::min(window.row_end, source.rows);
  window.col_end = std::min(window.col_end, source.cols);
  window.row_begin = std::min(window.row_begin, window.row_end);
  window.col_begin = std::min(window.col_begin, window.col_end);
  max_rows = std::max(max_rows, 1u);
  max_cols = std::max(max_cols, 1u);
  PooledGrid pooled;
  const std::uint32_t span_rows = window.row_end - window.row_begin;
  const std::uint32_t span_cols = window.col_end - window.col_begin;
  pooled.rows_per_cell = std::max(1u, (span_rows + max_rows - 1) / max_rows);
  pooled.cols_per_cell = std::max(1u, (span_cols + max_cols - 1) / max_cols);
  Grid& out = pooled.grid;
  out.rows = (span_rows + pooled.rows_per_cell - 1) / pooled.rows_per_cell;
  out.cols = (span_cols + pooled.cols_per_cell - 1) / pooled.cols_per_cell;
  // Whole cells only: the window grows to the last full block so a cell always covers the same
  // source cells however it was reached.
  window.row_end = std::min(source.rows, window.row_begin + out.rows * pooled.rows_per_cell);
  window.col_end = std::min(source.cols, window.col_begin + out.cols * pooled.cols_per_cell);
  pooled.window = window;
  out.values.assign(std::size_t(out.rows) * out.cols, -std::numeric_limits<double>::infinity());
  out.flagged.assign(out.values.size(), 1);
  for (std::uint32_t r = window.row_begin; r < window.row_end; ++r) {
    const std::uint32_t pr = (r - window.row_begin) / pooled.rows_per_cell;
    for (std::uint32_t c = window.col_begin; c < window.col_end; ++c) {
      const std::size_t at = std::size_t(pr) * out.cols + (c - window.col_begin) / pooled.cols_per_cell;
      out.values[at] = std::max(out.values[at], source.at(r, c));
      if (!source.flag(r, c)) out.flagged[at] = 0;
    }
  }
  for (double& v : out.values)
    if (std::isinf(v)) v = 0.0;
  return pooled;
}

HistogramSeries nnz_histogram_series(const LayerSparsityStats& stats, std::size_t max_bins) {
  HistogramSeries series;
  series.mean = stats.nnz_per_token.mean;
  series.p99 = stats.nnz_per_token.p99;
  series.max = stats.nnz_per_token.max;
  const std::size_t values = stats.nnz_histogram.size();
  if (values == 0) return series;
  max_bins = std::max<std::size_t>(max_bins, 1);
  const std::size_t width = (values + max_bins - 1) / max_bins;
  series.bin_width = double(width);
  for (std::size_t start = 0; start < values; start += width) {
    std::uint64_t count = 0;
    for (std::size_t k = start; k < std::min(values, start + width); ++k) count += stats.nnz_histogram[k];
    series.bin_start.push_back(double(start));
    series.counts.push_back(double(count));
  }
  return series;
}

TileOccupancySeries tile_occupancy_series(const LayerSparsityStats& stats) {
  TileOccupancySeries series;
  std::size_t last = 0;
  for (std::size_t k = 0; k < stats.tile_count_histogram.size(); ++k)
    if (stats.tile_count_histogram[k]) last = k;
  for (std::size_t k = 0; k <= last && k < stats.tile_count_histogram.size(); ++k) {
    series.occupancy.push_back(double(k));
    series.counts.push_back(double(stats.tile_count_histogram[k]));
  }
  for (const CapacityCheck& check : stats.capacity)
    series.capacities.push_back(
        {check.compression, check.capacity, check.overflow_tiles, check.overflow_rows});
  return series;
}

std::optional<double> BreakEven::predicted_speedup(double at_density) const {
  if (points < 2) return std::nullopt;
  const double ratio = ratio_intercept + ratio_slope * at_density;
  if (!(ratio > 0)) return std::nullopt;
  return 1.0 / ratio;
}

BreakEven estimate_break_even(const Report& report) {
  BreakEven result;
  std::vector<std::pair<double, double>> points;  // (density, twell/dense)
  for (const LayerReport& layer : report.layers)
    if (const auto speedup = layer.speedup(); speedup && *speedup > 0)
      points.emplace_back(layer.sparsity.density, 1.0 / *speedup);
  if (points.size() < 2) return result;
  double mean_x = 0, mean_y = 0;
  for (const auto& [x, y] : points) {
    mean_x += x;
    mean_y += y;
  }
  mean_x /= double(points.size());
  mean_y /= double(points.size());
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sxx += (x - mean_x) * (x - mean_x);
    sxy += (x - mean_x) * (y - mean_y);
  }
  if (sxx <= 0) return result;
  result.points = points.size();
  result.ratio_slope = sxy / sxx;
  result.ratio_intercept = mean_y - result.ratio_slope * mean_x;
  if (result.ratio_slope != 0) {
    const double crossing = (1.0 - result.ratio_intercept) / result.ratio_slope;
    if (crossing >= 0 && crossing <= 1) result.density = crossing;
  }
  return result;
}

std::vector<KernelVariant> kernel_variants_that_ran(const Report& report) {
  std::vector<bool> ran(report.kernel_variants.size(), false);
  for (const KernelRecord& record : report.timeline)
    if (const KernelVariant* variant = find_kernel_variant(report.kernel_variants, record))
      ran[static_cast<std::size_t>(variant - report.kernel_variants.data())] = true;
  std::vector<KernelVariant> out;
  for (std::size_t i = 0; i < ran.size(); ++i)
    if (ran[i]) out.push_back(report.kernel_variants[i]);
  return out;
}

std::string kernel_variant_line(const Report& report, const KernelRecord& record) {
  const KernelVariant* variant = find_kernel_variant(report.kernel_variants, record);
  if (variant == nullptr) return {};
  return variant->name + " (" + variant->architectures + "): " + variant->description;
}

std::vector<BreakdownEntry> layer_breakdown(const Report& report, int layer) {
  std::vector<BreakdownEntry> entries;
  for (const KernelStat& kernel : report.kernels)
    if (kernel.layer == layer)
      entries.push_back({kernel.name, kernel.path, kernel.op, kernel.time.median_us});
  if (entries.empty()) {
    for (const LayerReport& l : report.layers) {
      if (l.index != layer) continue;
      for (const PathTiming& path : l.paths)
        for (const OpTiming& op : path.ops)
          entries.push_back({path.path + " " + op.op, path.path, op.op, op.time.median_us});
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const BreakdownEntry& a, const BreakdownEntry& b) {
    if (a.path != b.path) return a.path < b.path;  // "dense" before "twell"
    return a.median_us > b.median_us;
  });
  return entries;
}

const TimelineSpan* TimelineLayout::find(int track, double time_us) const {
  for (const TimelineSpan& span : spans)
    if (span.track == track && time_us >= span.begin_us && time_us <= span.end_us) return &span;
  return nullptr;
}

TimelineLayout layer_aligned_timeline(const Report& report) {
  TimelineLayout layout;
  auto is_layer_record = [](const KernelRecord& r) {
    return r.tag.phase == "layer_ffn" && !r.tag.warmup && r.tag.layer >= 0 && !r.tag.path.empty();
  };
  int repetition = std::numeric_limits<int>::max();
  for (const KernelRecord& r : report.timeline)
    if (is_layer_record(r)) repetition = std::min(repetition, r.tag.repetition);

  std::map<std::string, int> track_of;
  std::vector<std::string> extra;
  struct Group {
    std::uint64_t begin = std::numeric_limits<std::uint64_t>::max(), end = 0;
  };
  std::map<std::pair<int, std::string>, Group> groups;
  for (const KernelRecord& r : report.timeline) {
    if (!is_layer_record(r) || r.tag.repetition != repetition) continue;
    Group& g = groups[{r.tag.layer, r.tag.path}];
    g.begin = std::min(g.begin, r.start_ns);
    g.end = std::max(g.end, r.end_ns);
    if (r.tag.path != "dense" && r.tag.path != "twell" &&
        std::find(extra.begin(), extra.end(), r.tag.path) == extra.end())
      extra.push_back(r.tag.path);
  }
  if (groups.empty()) return layout;
  layout.tracks = {"dense", "twell"};
  layout.tracks.insert(layout.tracks.end(), extra.begin(), extra.end());
  for (std::size_t i = 0; i < layout.tracks.size(); ++i) track_of[layout.tracks[i]] = int(i);

  std::map<int, double> slot_width_us;
  for (const auto& [key, g] : groups)
    slot_width_us[key.first] = std::max(slot_width_us[key.first], double(g.end - g.begin) / 1000.0);
  double widest = 0;
  for (const auto& [layer, width] : slot_width_us) widest = std::max(widest, width);
  const double gap = std::max(widest * 0.1, 1e-3);
  std::map<int, double> slot_begin;
  double cursor = 0;
  for (const auto& [layer, width] : slot_width_us) {
    slot_begin[layer] = cursor;
    layout.layer_slots.push_back({layer, cursor, cursor + width});
    cursor += width + gap;
  }
  for (std::size_t i = 0; i < report.timeline.size(); ++i) {
    const KernelRecord& r = report.timeline[i];
    if (!is_layer_record(r) || r.tag.repetition != repetition) continue;
    const Group& g = groups[{r.tag.layer, r.tag.path}];
    const double begin = slot_begin[r.tag.layer] + double(r.start_ns - g.begin) / 1000.0;
    layout.spans.push_back({i, track_of[r.tag.path], r.tag.layer, begin, begin + r.duration_us()});
  }
  return layout;
}

std::uint64_t timeline_origin_ns(const Report& report) {
  if (report.timeline.empty()) return 0;
  std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
  for (const KernelRecord& r : report.timeline) first = std::min(first, r.start_ns);
  return first;
}

std::optional<double> LayerDelta::density_delta() const {
  return difference(density_a, density_b);
}
std::optional<double> LayerDelta::twell_us_delta() const {
  return difference(twell_us_a, twell_us_b);
}
std::optional<double> LayerDelta::speedup_delta() const {
  return difference(speedup_a, speedup_b);
}

std::vector<LayerDelta> layer_deltas(const Report& a, const Report& b) {
  std::set<int> indices;
  for (const LayerReport& l : a.layers) indices.insert(l.index);
  for (const LayerReport& l : b.layers) indices.insert(l.index);
  auto find = [](const Report& r, int index) -> const LayerReport* {
    for (const LayerReport& l : r.layers)
      if (l.index == index) return &l;
    return nullptr;
  };
  std::vector<LayerDelta> deltas;
  for (int index : indices) {
    LayerDelta d;
    d.layer = index;
    if (const LayerReport* la = find(a, index)) {
      d.density_a = la->sparsity.density;
      d.dense_us_a = path_median_us(*la, "dense");
      d.twell_us_a = path_median_us(*la, "twell");
      d.speedup_a = la->speedup();
    }
    if (const LayerReport* lb = find(b, index)) {
      d.density_b = lb->sparsity.density;
      d.dense_us_b = path_median_us(*lb, "dense");
      d.twell_us_b = path_median_us(*lb, "twell");
      d.speedup_b = lb->speedup();
    }
    deltas.push_back(d);
  }
  return deltas;
}

}  // namespace twell::views
