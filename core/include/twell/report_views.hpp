// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "twell/report.hpp"

/// Read-only derived series of a Report, shaped for presentation (the GUI's tables and plots, the
/// PDF report). Every number a view shows comes from here or straight from the Report, so views
/// hold no statistics of their own and these functions are tested without Qt.
namespace twell::views {

/// One row of the layer table.
struct LayerRow {
  int layer = 0;
  double density = 0;
  Distribution nnz_per_token;
  std::uint32_t neurons = 0;
  std::uint32_t dead_neurons = 0;
  double dead_fraction = 0;
  std::uint32_t tile_max = 0;
  std::uint32_t capacity = 0;                         ///< tile capacity at the report's compression factor
  std::optional<double> dense_us, twell_us, speedup;  ///< medians, when the path was timed
  std::optional<ErrorMetrics> error;                  ///< TwELL output against dense
  std::uint64_t overflow_rows = 0;                    ///< at the report's compression factor
  std::optional<FfnPath>
      dispatch;  ///< the path the per-layer dispatch picks, when the report has a break-even
};
std::vector<LayerRow> layer_rows(const Report& report);

/// Headline numbers of a run.
struct Overview {
  double overall_density = 0;  ///< non-zeros over all (token, neuron) pairs of every layer
  std::uint64_t dead_neurons = 0, neurons = 0;
  std::optional<double> dense_tokens_per_ms, twell_tokens_per_ms, end_to_end_speedup;
  /// The forward with each layer on the path the per-layer dispatch picked, and its speedup over dense.
  std::optional<double> dispatch_tokens_per_ms, dispatch_speedup;
  /// The share of each forward the device was kept busy (EndToEndPath::occupied_fraction), when
  /// the report has it: well below 1, launches and host work bound the throughputs above.
  std::optional<double> dense_occupied, twell_occupied, dispatch_occupied;
  std::size_t layers_twell_slower = 0;  ///< layers whose measured TwELL / dense speedup is below 1
  std::size_t layers_timed = 0;         ///< layers with both paths timed (a measured speedup)
  std::vector<std::string> warnings;    ///< the report's, plus any derive_report_warnings adds
};
Overview overview(const Report& report);

/// The report's kernel variants (Report::kernel_variants) that produced a record of its timeline,
/// in the report's order: which code ran, for the exported report's kernel list.
std::vector<KernelVariant> kernel_variants_that_ran(const Report& report);

/// "variant (architectures): description" for the variant that produced `record`, or "" when
/// the report does not describe it: the kernel table's and the timeline's hover text.
std::string kernel_variant_line(const Report& report, const KernelRecord& record);

/// A dense rows x cols grid of doubles, row-major, with a per-cell flag (dead neuron, empty block).
struct Grid {
  std::uint32_t rows = 0, cols = 0;
  std::vector<double> values;
  std::vector<std::uint8_t> flagged;
  double at(std::uint32_t row, std::uint32_t col) const { return values[std::size_t(row) * cols + col]; }
  bool flag(std::uint32_t row, std::uint32_t col) const {
    return flagged[std::size_t(row) * cols + col] != 0;
  }
};

/// Layers x neurons firing rate (fires / tokens); flagged = dead (never fired). Row i is
/// report.layers[i].
Grid firing_rate_grid(const Report& report);

/// A layer's token x neuron map as the fraction of each cell's block that fired (0..1); flagged =
/// nothing in the block fired.
Grid token_map_grid(const TokenNeuronMap& map);

/// How many tokens and neurons one cell of a token x neuron map covers.
struct MapCellSize {
  std::uint32_t tokens = 1, neurons = 1;
};
MapCellSize token_map_cell_size(const TokenNeuronMap& map);

/// Half-open window [begin, end) along both axes of a grid.
struct Window {
  std::uint32_t row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
};

/// A window of a grid reduced to at most max_rows x max_cols by max pooling, so that a lone
/// high value survives when many cells share a screen pixel. A pooled cell is flagged only when
/// every source cell in it is. Cell (r, c) covers source rows row_begin + r * rows_per_cell ...
struct PooledGrid {
  Grid grid;
  Window window;
  std::uint32_t rows_per_cell = 1, cols_per_cell = 1;
};
PooledGrid pool_max(const Grid& source, Window window, std::uint32_t max_rows, std::uint32_t max_cols);

/// Bars of a layer's nnz-per-token histogram, merged into at most max_bins equal-width bins, with
/// the markers the Distributions view draws.
struct HistogramSeries {
  std::vector<double> bin_start;  ///< first nnz value in the bin
  std::vector<double> counts;     ///< tokens in the bin
  double bin_width = 1;
  double mean = 0, p99 = 0, max = 0;
};
HistogramSeries nnz_histogram_series(const LayerSparsityStats& stats, std::size_t max_bins);

/// (row, tile) pairs per occupancy k = 0..max, and TwELL's capacity at each compression factor.
struct TileOccupancySeries {
  std::vector<double> occupancy, counts;
  struct Capacity {
    std::uint32_t compression = 0, capacity = 0;
    std::uint64_t overflow_tiles = 0, overflow_rows = 0;
  };
  std::vector<Capacity> capacities;
};
TileOccupancySeries tile_occupancy_series(const LayerSparsityStats& stats);

/// Where the TwELL path stops paying. TwELL's time is roughly a fixed cost plus a part that
/// scales with the non-zeros, so the time ratio twell/dense is fitted as a line in density by least
/// squares over the layers where both paths were timed; break-even is where the ratio reaches 1.
struct BreakEven {
  std::size_t points = 0;
  double ratio_intercept = 0, ratio_slope = 0;  ///< twell/dense ~ intercept + slope * density
  std::optional<double> density;  ///< absent with fewer than 2 distinct densities, a flat fit, or a
                                  ///< crossing outside [0, 1]
  /// The fitted speedup (dense/twell) at `density`, when the fit exists and is positive there.
  std::optional<double> predicted_speedup(double density) const;
};
BreakEven estimate_break_even(const Report& report);

/// One bar of a layer's per-kernel breakdown: per kernel name when the tracer saw kernels, per op
/// otherwise (CPU clock).
struct BreakdownEntry {
  std::string label, path, op;
  double median_us = 0;
};
std::vector<BreakdownEntry> layer_breakdown(const Report& report, int layer);

/// The timeline's layer_ffn records laid out with the dense and TwELL paths as two tracks aligned
/// by layer: each layer gets a slot as wide as its slower path, and records keep their offset from
/// the start of their (layer, path) group. Times in microseconds from the first slot.
struct TimelineSpan {
  std::size_t record = 0;  ///< index into report.timeline
  int track = 0;           ///< index into TimelineLayout::tracks
  int layer = 0;
  double begin_us = 0, end_us = 0;
};
struct TimelineLayout {
  std::vector<std::string> tracks;  ///< path names, dense first
  std::vector<TimelineSpan> spans;
  struct Slot {
    int layer = 0;
    double begin_us = 0, end_us = 0;
  };
  std::vector<Slot> layer_slots;
  /// The span under (track, time), if any.
  const TimelineSpan* find(int track, double time_us) const;
};
TimelineLayout layer_aligned_timeline(const Report& report);

/// The earliest start of the report's timeline (0 when empty): the zero of relative record times.
std::uint64_t timeline_origin_ns(const Report& report);

/// Per-layer comparison of two reports, matched by layer index.
struct LayerDelta {
  int layer = 0;
  std::optional<double> density_a, density_b;
  std::optional<double> dense_us_a, dense_us_b, twell_us_a, twell_us_b, speedup_a, speedup_b;
  std::optional<double> density_delta() const;
  std::optional<double> twell_us_delta() const;
  std::optional<double> speedup_delta() const;
};
std::vector<LayerDelta> layer_deltas(const Report& a, const Report& b);

}  // namespace twell::views
