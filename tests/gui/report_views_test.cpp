// SPDX-License-Identifier: GPL-3.0-or-later
// core's presentation series (report_views.hpp), checked against the sample report's construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sample_report.hpp"
#include "twell/report_views.hpp"

namespace twellscope::test {
namespace views = twell::views;

TEST(ReportViews, LayerRowsCarryTimingsAndCapacity) {
  const twell::Report report = makeSampleReport();
  const auto rows = views::layer_rows(report);
  ASSERT_EQ(rows.size(), std::size_t(kSampleLayers));
  for (int i = 0; i < kSampleLayers; ++i) {
    EXPECT_EQ(rows[i].layer, i);
    EXPECT_DOUBLE_EQ(*rows[i].dense_us, sampleDenseUs(i));
    EXPECT_DOUBLE_EQ(*rows[i].twell_us, sampleTwellUs(i));
    EXPECT_NEAR(*rows[i].speedup, sampleDenseUs(i) / sampleTwellUs(i), 1e-12);
    EXPECT_EQ(rows[i].capacity, 31u);
    EXPECT_NEAR(rows[i].density, kSampleDensities[i], 0.25 * kSampleDensities[i]);
    // Sparse layers also leave some live neurons unfired on 64 tokens; the densest only the dead ones.
    EXPECT_GE(rows[i].dead_neurons, (kSampleNeurons + kSampleDeadStride - 1) / kSampleDeadStride);
  }
  EXPECT_EQ(rows[3].dead_neurons, (kSampleNeurons + kSampleDeadStride - 1) / kSampleDeadStride);
  // 30 % density puts ~77 non-zeros in a 256-wide tile: far past C=8's 31.
  EXPECT_GT(rows[3].overflow_rows, 0u);
  EXPECT_EQ(rows[0].overflow_rows, 0u);
}

TEST(ReportViews, LayerRowsSayWhichPathTheDispatchRuns) {
  twell::Report report = makeSampleReport();
  for (const auto& row : views::layer_rows(report)) EXPECT_FALSE(row.dispatch) << row.layer;
  // Between the two sparsest layers' densities and the rest.
  report.dispatch_break_even =
      twell::FfnBreakEven{0.5 * (kSampleDensities[1] + kSampleDensities[2]), true, "test"};
  const auto rows = views::layer_rows(report);
  ASSERT_EQ(rows.size(), std::size_t(kSampleLayers));
  EXPECT_EQ(rows[0].dispatch, twell::FfnPath::Twell);
  EXPECT_EQ(rows[1].dispatch, twell::FfnPath::Twell);
  EXPECT_EQ(rows[2].dispatch, twell::FfnPath::Dense);
  EXPECT_EQ(rows[3].dispatch, twell::FfnPath::Dense);
}

TEST(ReportViews, OverviewWeighsDensityAndCollectsWarnings) {
  const twell::Report report = makeSampleReport();
  const views::Overview o = views::overview(report);
  double sum = 0;
  for (const auto& l : report.layers) sum += l.sparsity.density;
  EXPECT_NEAR(o.overall_density, sum / kSampleLayers, 1e-12);  // equal tokens x neurons per layer
  EXPECT_DOUBLE_EQ(*o.end_to_end_speedup, 1.2);
  EXPECT_DOUBLE_EQ(*o.dispatch_tokens_per_ms, 128.0);
  EXPECT_DOUBLE_EQ(*o.dispatch_speedup, 1.28);
  ASSERT_TRUE(o.dense_occupied && o.twell_occupied);
  EXPECT_DOUBLE_EQ(*o.dense_occupied, 0.95);
  EXPECT_NEAR(*o.twell_occupied, 0.9, 1e-12);
  EXPECT_FALSE(o.dispatch_occupied);  // its forward has no occupied time
  EXPECT_EQ(o.layers_twell_slower, 1u);
  EXPECT_EQ(o.layers_timed, static_cast<std::size_t>(kSampleLayers));

  twell::Report without_dispatch = report;
  without_dispatch.end_to_end.pop_back();
  EXPECT_FALSE(views::overview(without_dispatch).dispatch_tokens_per_ms);
  EXPECT_FALSE(views::overview(without_dispatch).dispatch_speedup);
  const bool mentionsOverflow = std::any_of(o.warnings.begin(), o.warnings.end(), [](const std::string& w) {
    return w.find("overflow") != std::string::npos;
  });
  EXPECT_TRUE(mentionsOverflow);
}

TEST(ReportViews, FiringRateGridFlagsDeadNeurons) {
  const twell::Report report = makeSampleReport();
  const views::Grid grid = views::firing_rate_grid(report);
  ASSERT_EQ(grid.rows, std::uint32_t(kSampleLayers));
  ASSERT_EQ(grid.cols, kSampleNeurons);
  EXPECT_TRUE(grid.flag(2, 0));
  EXPECT_TRUE(grid.flag(2, kSampleDeadStride));
  const auto& fires = report.layers[2].sparsity.neuron_fire_counts;
  EXPECT_DOUBLE_EQ(grid.at(2, 5), double(fires[5]) / kSampleTokens);
}

TEST(ReportViews, MaxPoolingKeepsALoneHighValue) {
  views::Grid grid{1, 100, std::vector<double>(100, 0.01), std::vector<std::uint8_t>(100, 0)};
  grid.values[57] = 0.9;
  for (int i = 0; i < 10; ++i) grid.flagged[std::size_t(i)] = 1;
  const views::PooledGrid pooled = views::pool_max(grid, {0, 1, 0, 100}, 10, 10);
  ASSERT_EQ(pooled.cols_per_cell, 10u);
  ASSERT_EQ(pooled.grid.cols, 10u);
  EXPECT_DOUBLE_EQ(pooled.grid.at(0, 5), 0.9);
  EXPECT_DOUBLE_EQ(pooled.grid.at(0, 4), 0.01);
  EXPECT_TRUE(pooled.grid.flag(0, 0));  // every source cell flagged
  EXPECT_FALSE(pooled.grid.flag(0, 1));
  // A window zoomed onto 20 columns needs no pooling at 10+ pixels per column... at 20 pixels.
  const views::PooledGrid zoomed = views::pool_max(grid, {0, 1, 50, 70}, 10, 20);
  EXPECT_EQ(zoomed.cols_per_cell, 1u);
  EXPECT_DOUBLE_EQ(zoomed.grid.at(0, 7), 0.9);
}

TEST(ReportViews, HistogramSeriesMergesBinsAndKeepsTotals) {
  const twell::Report report = makeSampleReport();
  const auto& stats = report.layers[3].sparsity;
  const views::HistogramSeries series = views::nnz_histogram_series(stats, 10);
  EXPECT_LE(series.counts.size(), 10u);
  EXPECT_DOUBLE_EQ(std::accumulate(series.counts.begin(), series.counts.end(), 0.0), double(kSampleTokens));
  EXPECT_DOUBLE_EQ(series.max, stats.nnz_per_token.max);
  EXPECT_DOUBLE_EQ(series.p99, stats.nnz_per_token.p99);
}

TEST(ReportViews, BreakEvenFromTheSampleCostModel) {
  // twell/dense = 0.6 + 2 * density exactly, so the fit is exact and crosses 1 at density 0.2 ...
  // in the sample's *drawn* densities; the measured densities differ a little from the drawn ones.
  twell::Report report = makeSampleReport();
  for (int i = 0; i < kSampleLayers; ++i)
    report.layers[std::size_t(i)].sparsity.density = kSampleDensities[i];
  const views::BreakEven fit = views::estimate_break_even(report);
  ASSERT_TRUE(fit.density);
  EXPECT_NEAR(*fit.density, 0.2, 1e-9);
  EXPECT_NEAR(*fit.predicted_speedup(0.0), 1 / 0.6, 1e-9);
}

TEST(ReportViews, TimelineAlignsPathsByLayer) {
  const twell::Report report = makeSampleReport();
  const views::TimelineLayout layout = views::layer_aligned_timeline(report);
  ASSERT_EQ(layout.tracks.size(), 2u);
  ASSERT_EQ(layout.layer_slots.size(), std::size_t(kSampleLayers));
  ASSERT_EQ(layout.spans.size(), report.timeline.size());
  for (const auto& slot : layout.layer_slots)
    EXPECT_NEAR(slot.end_us - slot.begin_us, std::max(sampleDenseUs(slot.layer), sampleTwellUs(slot.layer)),
                1e-3);
  // Each (layer, path) group starts at its slot's start, although TwELL ran after dense.
  for (const auto& span : layout.spans) {
    const auto& r = report.timeline[span.record];
    if (r.tag.op == "gate_up" || r.tag.op == "gate_pack") {
      EXPECT_DOUBLE_EQ(span.begin_us, layout.layer_slots[std::size_t(span.layer)].begin_us);
    }
  }
  const auto* found = layout.find(1, layout.layer_slots[2].begin_us + 1);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(report.timeline[found->record].tag.op, "gate_pack");
}

TEST(ReportViews, BreakdownFallsBackToOps) {
  twell::Report report = makeSampleReport();
  EXPECT_EQ(views::layer_breakdown(report, 1).size(), 4u);
  report.kernels.clear();
  const auto ops = views::layer_breakdown(report, 1);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops.front().path, "dense");
  EXPECT_EQ(ops.front().op, "gate_up");
}

TEST(ReportViews, DeltasMatchLayersByIndex) {
  const twell::Report a = makeSampleReport();
  twell::Report b = makeSampleReport();
  b.layers.pop_back();
  b.layers[0].paths[1].total.median_us = 50;
  const auto deltas = views::layer_deltas(a, b);
  ASSERT_EQ(deltas.size(), std::size_t(kSampleLayers));
  EXPECT_DOUBLE_EQ(*deltas[0].twell_us_delta(), 50 - sampleTwellUs(0));
  EXPECT_FALSE(deltas[3].speedup_b);
  EXPECT_FALSE(deltas[3].speedup_delta());
}

}  // namespace twellscope::test
