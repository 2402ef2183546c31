// SPDX-License-Identifier: GPL-3.0-or-later
// Every item model through QAbstractItemModelTester (fatal mode), plus sorting and filtering.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <memory>

#include "compare_model.hpp"
#include "kernel_table_model.hpp"
#include "layer_table_model.hpp"
#include "sample_report.hpp"

namespace twellscope::test {
namespace {

using Tester = QAbstractItemModelTester;
constexpr auto kFatal = QAbstractItemModelTester::FailureReportingMode::Fatal;

}  // namespace

TEST(ItemModels, LayerTableModelPassesTheModelTester) {
  LayerTableModel model;
  LayerFilterProxy proxy;
  proxy.setSourceModel(&model);
  Tester tester(&model, kFatal);
  Tester proxyTester(&proxy, kFatal);
  const twell::Report report = makeSampleReport();
  model.setRows(twell::views::layer_rows(report));
  EXPECT_EQ(model.rowCount(), kSampleLayers);
  EXPECT_EQ(model.data(model.index(2, LayerTableModel::LayerColumn)).toString(), QStringLiteral("L2"));
  EXPECT_EQ(model.data(model.index(1, LayerTableModel::TileColumn))
                .toString()
                .section(QLatin1Char('/'), 1)
                .trimmed(),
            QStringLiteral("31"));
  EXPECT_EQ(model.data(model.index(0, LayerTableModel::DispatchColumn)).toString(), QStringLiteral("—"));
  twell::Report dispatched = report;
  dispatched.dispatch_break_even = twell::FfnBreakEven{0.05, true, "test"};
  model.setRows(twell::views::layer_rows(dispatched));
  EXPECT_EQ(model.data(model.index(0, LayerTableModel::DispatchColumn)).toString(), QStringLiteral("TwELL"));
  EXPECT_EQ(model.data(model.index(kSampleLayers - 1, LayerTableModel::DispatchColumn)).toString(),
            QStringLiteral("dense"));
  EXPECT_EQ(model.headerData(LayerTableModel::DispatchColumn, Qt::Horizontal).toString(),
            QStringLiteral("Dispatch"));
  model.setRows({});
  EXPECT_EQ(model.rowCount(), 0);
}

TEST(ItemModels, LayerTableSortsNumericallyAndFilters) {
  LayerTableModel model;
  model.setRows(twell::views::layer_rows(makeSampleReport()));
  LayerFilterProxy proxy;
  proxy.setSourceModel(&model);
  Tester tester(&proxy, kFatal);
  proxy.sort(LayerTableModel::SpeedupColumn, Qt::DescendingOrder);
  // Speedup falls with density, so the sparsest layer is fastest.
  EXPECT_EQ(proxy.data(proxy.index(0, LayerTableModel::LayerColumn)).toString(), QStringLiteral("L0"));
  EXPECT_EQ(proxy.data(proxy.index(3, LayerTableModel::LayerColumn)).toString(), QStringLiteral("L3"));
  proxy.setOnlyBelowBreakEven(true);
  ASSERT_EQ(proxy.rowCount(), 1);
  EXPECT_EQ(proxy.data(proxy.index(0, LayerTableModel::LayerColumn)).toString(), QStringLiteral("L3"));
  proxy.setOnlyBelowBreakEven(false);
  proxy.setText(QStringLiteral("2"));
  ASSERT_EQ(proxy.rowCount(), 1);
  EXPECT_EQ(proxy.mapToSource(proxy.index(0, 0)).row(), 2);
  proxy.setText(QString());
  proxy.setOnlyOverflowing(true);
  EXPECT_GE(proxy.rowCount(), 1);
  for (int r = 0; r < proxy.rowCount(); ++r)
    EXPECT_GT(
        proxy.data(proxy.index(r, LayerTableModel::OverflowColumn), LayerTableModel::SortRole).toDouble(), 0);
}

TEST(ItemModels, KernelTableModelPassesTheModelTesterAndFilters) {
  KernelTableModel model;
  KernelFilterProxy proxy;
  proxy.setSourceModel(&model);
  Tester tester(&model, kFatal);
  Tester proxyTester(&proxy, kFatal);
  auto report = std::make_shared<const twell::Report>(makeSampleReport());
  model.setReport(report);
  ASSERT_EQ(model.rowCount(), int(report->timeline.size()));
  EXPECT_EQ(model.data(model.index(0, KernelTableModel::StartColumn)).toString(), QStringLiteral("0.000"));
  EXPECT_EQ(model.data(model.index(0, KernelTableModel::GridColumn)).toString(), QStringLiteral("132×1×1"));
  EXPECT_EQ(model.data(model.index(0, KernelTableModel::RegistersColumn)).toInt(), 96);
  EXPECT_EQ(model.data(model.index(0, KernelTableModel::SharedColumn)).toInt(), 16384);
  // The name's tooltip says what a described kernel does, and only the name for the others.
  for (int row = 0; row < model.rowCount(); ++row) {
    const QString tip =
        model.data(model.index(row, KernelTableModel::NameColumn), Qt::ToolTipRole).toString();
    const QString name = model.data(model.index(row, KernelTableModel::NameColumn)).toString();
    if (name == QStringLiteral("twell_up_down"))
      EXPECT_EQ(tip,
                QStringLiteral("twell_up_down\n\ntwell_up_down (sm_80+): fused consumer, one CTA per token"));
    else
      EXPECT_EQ(tip, name);
  }
  proxy.setNameFilter(QStringLiteral("GATE_PACK"));
  EXPECT_EQ(proxy.rowCount(), kSampleLayers);
  proxy.setLayerFilter(2);
  ASSERT_EQ(proxy.rowCount(), 1);
  EXPECT_EQ(proxy.data(proxy.index(0, KernelTableModel::LayerColumn)).toString(), QStringLiteral("L2"));
  proxy.setNameFilter(QString());
  proxy.setPathFilter(QStringLiteral("dense"));
  EXPECT_EQ(proxy.rowCount(), 2);
  proxy.setLayerFilter(-2);
  proxy.setPathFilter(QString());
  proxy.sort(KernelTableModel::DurationColumn, Qt::DescendingOrder);
  const double first =
      proxy.data(proxy.index(0, KernelTableModel::DurationColumn), KernelTableModel::SortRole).toDouble();
  const double last = proxy
                          .data(proxy.index(proxy.rowCount() - 1, KernelTableModel::DurationColumn),
                                KernelTableModel::SortRole)
                          .toDouble();
  EXPECT_GT(first, last);
  model.setReport(nullptr);
  EXPECT_EQ(proxy.rowCount(), 0);
}

TEST(ItemModels, KernelTableShowsNoLaunchResourcesForCpuRegions) {
  // A CPU backend's region has no grid, so no registers or shared memory to show (not zero).
  twell::Report cpu = makeSampleReport();
  for (twell::KernelRecord& r : cpu.timeline) {
    r.kind = "cpu";
    r.grid = {0, 0, 0};
    r.block = {0, 0, 0};
    r.registers_per_thread = 0;
    r.static_shared_bytes = 0;
  }
  KernelTableModel model;
  model.setReport(std::make_shared<const twell::Report>(std::move(cpu)));
  ASSERT_GT(model.rowCount(), 0);
  for (const int column : {int(KernelTableModel::GridColumn), int(KernelTableModel::BlockColumn),
                           int(KernelTableModel::RegistersColumn), int(KernelTableModel::SharedColumn)})
    EXPECT_EQ(model.data(model.index(0, column)).toString(), QStringLiteral("—")) << column;
}

TEST(ItemModels, CompareModelPassesTheModelTester) {
  CompareModel model;
  QSortFilterProxyModel proxy;
  proxy.setSourceModel(&model);
  proxy.setSortRole(CompareModel::SortRole);
  Tester tester(&model, kFatal);
  Tester proxyTester(&proxy, kFatal);
  const twell::Report a = makeSampleReport();
  twell::Report b = makeSampleReport();
  b.layers[1].paths[1].total.median_us = sampleTwellUs(1) / 2;
  model.setDeltas(twell::views::layer_deltas(a, b));
  ASSERT_EQ(model.rowCount(), kSampleLayers);
  EXPECT_TRUE(
      model.data(model.index(1, CompareModel::TwellDeltaColumn)).toString().startsWith(QLatin1Char('-')));
  EXPECT_EQ(model.data(model.index(0, CompareModel::SpeedupDeltaColumn)).toString(), QStringLiteral("0.000"));
  proxy.sort(CompareModel::SpeedupDeltaColumn, Qt::DescendingOrder);
  EXPECT_EQ(proxy.data(proxy.index(0, CompareModel::LayerColumn)).toString(), QStringLiteral("L1"));
}

}  // namespace twellscope::test
