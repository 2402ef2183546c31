// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "plot_page.hpp"
#include "twell/report_views.hpp"

namespace twellscope {

class GridMap;
class ReportDocument;

/// The selected layer's token x neuron firing map (the report keeps it max-pooled to a bounded
/// size; the plot pools it again to the screen and brings the detail back as one zooms).
class TokenMapView : public PlotPage {
  Q_OBJECT

 public:
  TokenMapView(ReportDocument* document, QWidget* parent = nullptr);
  GridMap* gridMap() const { return m_grid; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;

 private:
  void rebuild();

  ReportDocument* m_document;
  GridMap* m_grid;
  twell::views::MapCellSize m_cell;
};

}  // namespace twellscope
