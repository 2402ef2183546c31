// SPDX-License-Identifier: GPL-3.0-or-later
// Opening a report fills every view; hover read-outs; one layer selection across views; zoom,
// pan and reset; the empty state and error banner.
#include <QDropEvent>
#include <QLineEdit>
#include <QMimeData>
#include <QPushButton>
#include <QTableView>
#include <QUrl>

#include "compare_model.hpp"
#include "compare_view.hpp"
#include "distributions_view.hpp"
#include "error_banner.hpp"
#include "grid_map.hpp"
#include "gui_fixture.hpp"
#include "heatmap_view.hpp"
#include "kernel_table_model.hpp"
#include "kernels_view.hpp"
#include "layer_table_model.hpp"
#include "layer_table_view.hpp"
#include "overview_view.hpp"
#include "report_document.hpp"
#include "speedup_view.hpp"
#include "timing_view.hpp"
#include "token_map_view.hpp"

namespace twellscope::test {

TEST_F(GuiTest, StartsOnTheEmptyStateWithTheThreeWaysIn) {
  EXPECT_TRUE(window->isShowingEmptyState());
  for (const char* name : {"openCheckpoint", "openReport", "tryDemo"})
    EXPECT_NE(window->findChild<QPushButton*>(QString::fromLatin1(name)), nullptr) << name;
  EXPECT_TRUE(window->banner()->text().isEmpty());
}

TEST_F(GuiTest, ABrokenReportShowsWhatToDoAndKeepsTheWindow) {
  const auto bad = dir.path() / "broken.json";
  twell::test::write_file(bad, "{\"schema\": 12");
  EXPECT_FALSE(window->openReport(QString::fromStdString(bad.string())));
  const QString text = window->banner()->text();
  EXPECT_TRUE(text.contains(QStringLiteral("broken.json"))) << text.toStdString();
  EXPECT_TRUE(text.contains(QStringLiteral("Check the file"))) << text.toStdString();
  EXPECT_TRUE(window->isShowingEmptyState());
  EXPECT_FALSE(window->openReport(QString::fromStdString((dir.path() / "missing.json").string())));
  EXPECT_TRUE(window->isShowingEmptyState());
}

TEST_F(GuiTest, OpeningAReportFillsEveryView) {
  ASSERT_TRUE(window->openReport(reportPath));
  EXPECT_FALSE(window->isShowingEmptyState());
  EXPECT_TRUE(window->recentFiles().contains(QFileInfo(reportPath).absoluteFilePath()));
  const twell::Report expected = makeSampleReport();

  const QString summary = window->overview()->summaryText();
  for (const char* part :
       {"Test GPU", "cupti", "100 tokens/ms, device busy 95 %", "120 tokens/ms, device busy 90 %", "1.200×",
        "C=8", "per-layer dispatch", "128 tokens/ms", "1.280×", "TwELL kernels", "sm90/balanced_cta/sparse"})
    EXPECT_TRUE(summary.contains(QString::fromUtf8(part))) << part << "\n" << summary.toStdString();
  EXPECT_TRUE(window->overview()->warnings().join(QLatin1Char('\n')).contains(QStringLiteral("overflow")));

  EXPECT_EQ(window->layerTable()->model()->rowCount(), kSampleLayers);

  const GridMap* heat = window->heatmap()->gridMap();
  EXPECT_EQ(heat->source().rows, std::uint32_t(kSampleLayers));
  EXPECT_EQ(heat->source().cols, kSampleNeurons);
  EXPECT_FALSE(heat->colorMap()->interpolate());
  EXPECT_EQ(heat->colorScale()->dataScaleType(), QCPAxis::stLogarithmic);

  const GridMap* tokens = window->tokenMap()->gridMap();
  EXPECT_EQ(tokens->source().rows, expected.layers[0].sparsity.map.rows);
  EXPECT_EQ(tokens->source().cols, expected.layers[0].sparsity.map.cols);

  const auto& histogram = window->distributions()->histogram()->series();
  double tokensCounted = 0;
  for (double c : histogram.counts) tokensCounted += c;
  EXPECT_DOUBLE_EQ(tokensCounted, kSampleTokens);
  EXPECT_EQ(window->distributions()->occupancy()->series().capacities.size(), 3u);

  QCPBars* dense = window->timing()->layers()->denseBars();
  ASSERT_EQ(dense->data()->size(), kSampleLayers);
  for (int i = 0; i < kSampleLayers; ++i) {
    EXPECT_DOUBLE_EQ(dense->data()->at(i)->value, sampleDenseUs(i));
    EXPECT_DOUBLE_EQ(window->timing()->layers()->twellBars()->data()->at(i)->value, sampleTwellUs(i));
  }
  EXPECT_EQ(window->timing()->layers()->speedupGraph()->data()->size(), kSampleLayers);
  EXPECT_EQ(window->timing()->breakdown()->entries().size(), 4u);

  EXPECT_EQ(window->speedup()->pointsGraph()->data()->size(), kSampleLayers);
  EXPECT_TRUE(window->document()->breakEven().density.has_value());

  EXPECT_EQ(window->kernels()->model()->rowCount(), int(expected.timeline.size()));
  EXPECT_EQ(window->kernels()->timeline()->layout().spans.size(), expected.timeline.size());
  EXPECT_EQ(window->compare()->model()->rowCount(), 0);
}

TEST_F(GuiTest, TheSpeedupPlotMarksTheDispatchThresholdBesideTheFittedBreakEven) {
  auto markerTexts = [&] {
    QStringList texts;
    QCustomPlot* plot = window->speedup()->plot();
    for (int i = 0; i < plot->itemCount(); ++i)
      if (auto* text = qobject_cast<QCPItemText*>(plot->item(i))) texts << text->text();
    return texts.join(QLatin1Char('|'));
  };
  ASSERT_TRUE(window->openReport(reportPath));
  EXPECT_TRUE(markerTexts().contains(QStringLiteral("break-even density"))) << markerTexts().toStdString();
  EXPECT_FALSE(markerTexts().contains(QStringLiteral("dispatch"))) << markerTexts().toStdString();

  twell::Report dispatched = makeSampleReport();
  dispatched.dispatch_break_even = twell::FfnBreakEven{0.0105, true, "test"};
  const QString path = QString::fromStdString((dir.path() / "dispatched.json").string());
  twell::save_report(dispatched, path.toStdString());
  ASSERT_TRUE(window->openReport(path));
  EXPECT_TRUE(markerTexts().contains(QStringLiteral("dispatch: TwELL below 1.05")))
      << markerTexts().toStdString();
  EXPECT_GE(window->speedup()->plot()->xAxis->range().upper, 0.0105 * 1.4 - 1e-12);
}

TEST_F(GuiTest, HoverShowsExactValues) {
  ASSERT_TRUE(window->openReport(reportPath));
  const twell::Report expected = makeSampleReport();
  show(QStringLiteral("heatmap"));
  window->heatmap()->resetView();
  QCustomPlot* plot = window->heatmap()->plot();
  const std::uint32_t fires = expected.layers[2].sparsity.neuron_fire_counts[5];
  // Zoom onto a few neurons so a pixel column is a single neuron.
  plot->xAxis->setRange(-0.5, 40.5);
  plot->replot();
  hover(plot, pixelOf(plot, 5, 2));
  EXPECT_EQ(window->heatmap()->readoutText(),
            QStringLiteral("L2 · neuron 5: fired on %1 of 64 tokens, rate %2")
                .arg(fires)
                .arg(double(fires) / 64, 0, 'g', 6));
  hover(plot, pixelOf(plot, kSampleDeadStride, 1));
  EXPECT_TRUE(window->heatmap()->readoutText().startsWith(QStringLiteral("L1 · neuron 17: dead")))
      << window->heatmap()->readoutText().toStdString();

  show(QStringLiteral("timing"));
  QCustomPlot* timing = window->timing()->layers()->plot();
  hover(timing, QPoint(int(timing->xAxis->coordToPixel(1)), timing->axisRect()->center().y()));
  const QString text = window->timing()->layers()->readoutText();
  EXPECT_TRUE(text.startsWith(QStringLiteral("L1: dense 110.0 µs"))) << text.toStdString();

  show(QStringLiteral("speedup"));
  QCustomPlot* scatter = window->speedup()->plot();
  const auto& row = window->document()->layerRows()[3];
  hover(scatter, pixelOf(scatter, row.density, *row.speedup));
  EXPECT_TRUE(window->speedup()->readoutText().startsWith(QStringLiteral("L3: density")))
      << window->speedup()->readoutText().toStdString();

  show(QStringLiteral("kernels"));
  QCustomPlot* timeline = window->kernels()->timeline()->plot();
  const auto& slot = window->kernels()->timeline()->layout().layer_slots[1];
  hover(timeline, pixelOf(timeline, slot.begin_us + 1, 1));
  EXPECT_TRUE(window->kernels()->timeline()->readoutText().startsWith(
      QStringLiteral("L1 twell gate_pack: twell_gate_pack<8>")))
      << window->kernels()->timeline()->readoutText().toStdString();
}

TEST_F(GuiTest, SelectingALayerAnywhereSelectsItEverywhere) {
  ASSERT_TRUE(window->openReport(reportPath));
  const twell::Report expected = makeSampleReport();
  ReportDocument* document = window->document();
  EXPECT_EQ(document->selectedLayer(), 0);

  show(QStringLiteral("heatmap"));
  window->heatmap()->resetView();
  QCustomPlot* heat = window->heatmap()->plot();
  heat->xAxis->setRange(-0.5, 40.5);
  heat->replot();
  click(heat, pixelOf(heat, 9, 2));
  EXPECT_EQ(document->selectedLayer(), 2);
  EXPECT_EQ(document->selectedNeuron(), 9);

  QTableView* table = window->layerTable()->table();
  EXPECT_EQ(window->layerTable()->proxy()->mapToSource(table->currentIndex()).row(), 2);
  EXPECT_EQ(window->tokenMap()->gridMap()->source().values,
            twell::views::token_map_grid(expected.layers[2].sparsity.map).values);
  EXPECT_DOUBLE_EQ(window->distributions()->histogram()->series().max,
                   expected.layers[2].sparsity.nnz_per_token.max);
  EXPECT_EQ(window->timing()->breakdown()->entries().front().median_us, expected.kernels[8].time.median_us);

  // From the table to the plots.
  show(QStringLiteral("layers"));
  table->selectRow(
      window->layerTable()->proxy()->mapFromSource(window->layerTable()->model()->index(3, 0)).row());
  EXPECT_EQ(document->selectedLayer(), 3);
  EXPECT_DOUBLE_EQ(window->distributions()->histogram()->series().max,
                   expected.layers[3].sparsity.nnz_per_token.max);

  // From the timing bars.
  show(QStringLiteral("timing"));
  QCustomPlot* timing = window->timing()->layers()->plot();
  click(timing, QPoint(int(timing->xAxis->coordToPixel(1)), timing->axisRect()->center().y()));
  EXPECT_EQ(document->selectedLayer(), 1);
  EXPECT_EQ(window->layerTable()->proxy()->mapToSource(table->currentIndex()).row(), 1);

  // From the speedup scatter.
  show(QStringLiteral("speedup"));
  QCustomPlot* scatter = window->speedup()->plot();
  const auto& row = document->layerRows()[0];
  click(scatter, pixelOf(scatter, row.density, *row.speedup));
  EXPECT_EQ(document->selectedLayer(), 0);
}

TEST_F(GuiTest, WheelZoomsInWithMoreDetailDragPansResetRestores) {
  ASSERT_TRUE(window->openReport(reportPath));
  show(QStringLiteral("heatmap"));
  window->heatmap()->resetView();
  QCustomPlot* plot = window->heatmap()->plot();
  const GridMap* grid = window->heatmap()->gridMap();
  const QCPRange full = plot->xAxis->range();
  const std::uint32_t pooledBefore = grid->pooled().cols_per_cell;
  ASSERT_GT(pooledBefore, 1u) << "1024 neurons should not fit the plot's width pixel for pixel";

  const QPoint centre = plot->axisRect()->center();
  for (int i = 0; i < 6; ++i) wheel(plot, centre, 1);
  const QCPRange zoomed = plot->xAxis->range();
  EXPECT_LT(zoomed.size(), full.size() / 2);
  EXPECT_EQ(grid->pooled().cols_per_cell, 1u) << "zooming in shows single neurons";

  drag(plot, centre, centre + QPoint(100, 0));
  const QCPRange panned = plot->xAxis->range();
  EXPECT_NEAR(panned.size(), zoomed.size(), 1e-6 * zoomed.size());
  EXPECT_LT(panned.lower, zoomed.lower);

  window->heatmap()->resetView();
  EXPECT_DOUBLE_EQ(plot->xAxis->range().lower, full.lower);
  EXPECT_DOUBLE_EQ(plot->xAxis->range().upper, full.upper);
  EXPECT_EQ(grid->pooled().cols_per_cell, pooledBefore);
}

TEST_F(GuiTest, ComparesTwoReportsPerLayer) {
  ASSERT_TRUE(window->openReport(reportPath));
  twell::Report b = makeSampleReport();
  b.layers[1].paths[1].total.median_us = sampleTwellUs(1) / 2;
  b.end_to_end[1].tokens_per_ms *= 1.1;
  b.device.name = "Other GPU";
  // B's consumer is another kernel variant: the summary names the code that changed.
  for (twell::KernelRecord& record : b.timeline)
    if (record.name == "twell_up_down") record.name = "twell_up_down_warp";
  b.kernel_variants.push_back(
      {"twell_up_down_warp", false, "twell", "up_down", "sm_80+", "one warp per token"});
  const QString bPath = QString::fromStdString((dir.path() / "b.json").string());
  twell::save_report(b, bPath.toStdString());
  ASSERT_TRUE(window->openComparison(bPath));
  EXPECT_EQ(window->currentViewName(), QStringLiteral("compare"));
  CompareModel* model = window->compare()->model();
  ASSERT_EQ(model->rowCount(), kSampleLayers);
  EXPECT_DOUBLE_EQ(*model->deltas()[1].twell_us_delta(), -sampleTwellUs(1) / 2);
  EXPECT_DOUBLE_EQ(*model->deltas()[0].speedup_delta(), 0.0);
  const QString summary = window->compare()->summaryText();
  for (const char* part : {"end-to-end twell tokens/ms 1.100×", "end-to-end dense tokens/ms 1.000×",
                           "end-to-end dispatch tokens/ms 1.000×", "Caveat: device differs: Test GPU",
                           "FFN kernels that ran only in A: twell_up_down\n",
                           "FFN kernels that ran only in B: twell_up_down_warp"})
    EXPECT_TRUE(summary.contains(QString::fromUtf8(part))) << part << "\n" << summary.toStdString();
}

TEST_F(GuiTest, DroppingAReportOpensIt) {
  auto* mime = new QMimeData;
  mime->setUrls({QUrl::fromLocalFile(reportPath)});
  // Qt delivers a drop only to a widget that accepted the drag's enter event.
  QDragEnterEvent enter(QPoint(700, 450), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(window.get(), &enter);
  EXPECT_TRUE(enter.isAccepted());
  QDropEvent drop(QPointF(700, 450), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(window.get(), &drop);
  EXPECT_FALSE(window->isShowingEmptyState());
  EXPECT_EQ(window->document()->sourcePath(), reportPath);
  delete mime;
}

TEST_F(GuiTest, KernelFiltersFollowTheControls) {
  ASSERT_TRUE(window->openReport(reportPath));
  show(QStringLiteral("kernels"));
  auto* name = window->kernels()->findChild<QLineEdit*>();
  ASSERT_NE(name, nullptr);
  QTest::keyClicks(name, QStringLiteral("up_down"));
  EXPECT_EQ(window->kernels()->proxy()->rowCount(), kSampleLayers);
}

}  // namespace twellscope::test
