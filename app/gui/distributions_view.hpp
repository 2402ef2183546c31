// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

#include "plot_page.hpp"
#include "twell/report_views.hpp"

namespace twellscope {

class ReportDocument;

/// The selected layer's non-zeros per token, with mean, p99 and max marked.
class NnzHistogramPlot : public PlotPage {
  Q_OBJECT

 public:
  NnzHistogramPlot(ReportDocument* document, QWidget* parent = nullptr);
  const twell::views::HistogramSeries& series() const { return m_series; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;

 private:
  void rebuild();

  ReportDocument* m_document;
  QCPBars* m_bars;
  twell::views::HistogramSeries m_series;
};

/// The selected layer's (token, tile) occupancy against TwELL's capacity at each C.
class TileOccupancyPlot : public PlotPage {
  Q_OBJECT

 public:
  TileOccupancyPlot(ReportDocument* document, QWidget* parent = nullptr);
  const twell::views::TileOccupancySeries& series() const { return m_series; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;

 private:
  void rebuild();

  ReportDocument* m_document;
  QCPBars* m_bars;
  twell::views::TileOccupancySeries m_series;
};

class DistributionsView : public QWidget {
  Q_OBJECT

 public:
  DistributionsView(ReportDocument* document, QWidget* parent = nullptr);
  NnzHistogramPlot* histogram() const { return m_histogram; }
  TileOccupancyPlot* occupancy() const { return m_occupancy; }

 private:
  NnzHistogramPlot* m_histogram;
  TileOccupancyPlot* m_occupancy;
};

}  // namespace twellscope
