// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "plot_page.hpp"

namespace twellscope {

class GridMap;
class ReportDocument;

/// Layers x neurons firing rate, log colour scale, dead neurons hatched. Click selects a layer and
/// a neuron.
class HeatmapView : public PlotPage {
  Q_OBJECT

 public:
  HeatmapView(ReportDocument* document, QWidget* parent = nullptr);
  GridMap* gridMap() const { return m_grid; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;
  void clicked(double key, double value) override;

 private:
  void rebuild();
  void showSelection();

  ReportDocument* m_document;
  GridMap* m_grid;
  QCPItemRect* m_selection;
};

}  // namespace twellscope
