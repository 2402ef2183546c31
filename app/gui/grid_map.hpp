// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QBrush>

#include "qcp.hpp"
#include "twell/report_views.hpp"

namespace twellscope {

/// Draws a views::Grid as a QCPColorMap with a log colour scale, max-pooled to the pixels of the
/// visible window and re-pooled whenever the axes move, so zooming in brings back detail that a
/// screen pixel could not hold. Flagged cells are transparent over `flaggedBrush`.
/// Axis coordinates: source column c spans keys [c * keyScale - 0.5, (c + 1) * keyScale - 0.5).
class GridMap : public QObject {
  Q_OBJECT

 public:
  GridMap(QCustomPlot* plot, const QString& scaleLabel, QBrush flaggedBrush);

  void setSource(twell::views::Grid grid, double keyScale, double valueScale);
  void clear();
  bool hasData() const { return m_source.rows > 0 && m_source.cols > 0; }
  /// Source cell under a plot coordinate, or -1 outside the grid.
  int columnAt(double key) const;
  int rowAt(double value) const;
  QCPRange fullKeyRange() const;
  QCPRange fullValueRange() const;
  const twell::views::Grid& source() const { return m_source; }
  const twell::views::PooledGrid& pooled() const { return m_pooled; }
  QCPColorMap* colorMap() const { return m_map; }
  QCPColorScale* colorScale() const { return m_scale; }

 public slots:
  /// Re-pools the visible window (called on every axis range change).
  void refresh();

 private:
  QCustomPlot* m_plot;
  QCPColorMap* m_map;
  QCPColorScale* m_scale;
  twell::views::Grid m_source;
  twell::views::PooledGrid m_pooled;
  double m_keyScale = 1, m_valueScale = 1;
  bool m_hasPooled = false;
};

}  // namespace twellscope
