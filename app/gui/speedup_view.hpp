// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "plot_page.hpp"

namespace twellscope {

class ReportDocument;

/// Measured speedup against activation density, one point per layer, with the fitted cost model
/// and the break-even density marked. Click selects the nearest layer.
class SpeedupView : public PlotPage {
  Q_OBJECT

 public:
  SpeedupView(ReportDocument* document, QWidget* parent = nullptr);
  QCPGraph* pointsGraph() const { return m_points; }
  QCPGraph* fitGraph() const { return m_fit; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;
  void clicked(double key, double value) override;

 private:
  void rebuild();
  /// The density below which the report's dispatch runs TwELL; 0 without one.
  double dispatchThreshold() const;
  void showSelection();
  /// The layer whose point is within a few pixels of (key, value), or -1.
  int layerNear(double key, double value) const;

  ReportDocument* m_document;
  QCPGraph *m_points, *m_fit, *m_selected;
};

}  // namespace twellscope
