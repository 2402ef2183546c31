// SPDX-License-Identifier: GPL-3.0-or-later
#include "grid_map.hpp"

#include <algorithm>
#include <cmath>

namespace twellscope {
namespace {

std::uint32_t clampIndex(double value, std::uint32_t limit) {
  return std::uint32_t(std::clamp(value, 0.0, double(limit)));
}

}  // namespace

GridMap::GridMap(QCustomPlot* plot, const QString& scaleLabel, QBrush flaggedBrush)
    : QObject(plot), m_plot(plot) {
  m_map = new QCPColorMap(plot->xAxis, plot->yAxis);
  m_map->setInterpolate(false);    // interpolation would blur single neurons into their neighbours
  m_map->setTightBoundary(false);  // true would clip the outermost cells to half
  m_map->setGradient(QCPColorGradient::gpThermal);
  m_scale = new QCPColorScale(plot);
  m_scale->setType(QCPAxis::atRight);
  m_scale->setDataScaleType(QCPAxis::stLogarithmic);
  m_scale->axis()->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  m_scale->axis()->setNumberFormat(QStringLiteral("eb"));
  m_scale->axis()->setNumberPrecision(0);
  m_scale->setLabel(scaleLabel);
  plot->plotLayout()->addElement(0, 1, m_scale);
  m_map->setColorScale(m_scale);
  auto* margins = new QCPMarginGroup(plot);
  plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  m_scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  plot->axisRect()->setBackground(flaggedBrush);
  connect(plot->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, &GridMap::refresh);
  connect(plot->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, &GridMap::refresh);
  // A resize changes how many source cells share a pixel; refresh() returns early when it does not.
  connect(plot, &QCustomPlot::afterLayout, this, &GridMap::refresh);
}

void GridMap::setSource(twell::views::Grid grid, double keyScale, double valueScale) {
  m_source = std::move(grid);
  m_keyScale = keyScale;
  m_valueScale = valueScale;
  m_hasPooled = false;
  // A fixed colour range for the whole source, so colours do not shift as the view zooms.
  double lowest = 0, highest = 0;
  for (std::size_t i = 0; i < m_source.values.size(); ++i) {
    const double v = m_source.values[i];
    if (m_source.flagged[i] || !(v > 0)) continue;
    lowest = lowest > 0 ? std::min(lowest, v) : v;
    highest = std::max(highest, v);
  }
  if (!(lowest > 0)) lowest = highest = 1;
  if (highest <= lowest) lowest = highest / 10;
  m_map->setDataRange(QCPRange(lowest, highest));
  m_map->setVisible(hasData());
  m_scale->setVisible(hasData());
}

void GridMap::clear() {
  setSource({}, 1, 1);
}

int GridMap::columnAt(double key) const {
  const double c = std::floor((key + 0.5) / m_keyScale);
  return c >= 0 && c < m_source.cols ? int(c) : -1;
}

int GridMap::rowAt(double value) const {
  const double r = std::floor((value + 0.5) / m_valueScale);
  return r >= 0 && r < m_source.rows ? int(r) : -1;
}

QCPRange GridMap::fullKeyRange() const {
  return QCPRange(-0.5, m_source.cols * m_keyScale - 0.5);
}

QCPRange GridMap::fullValueRange() const {
  return QCPRange(-0.5, m_source.rows * m_valueScale - 0.5);
}

void GridMap::refresh() {
  if (!hasData()) return;
  const QCPRange keys = m_plot->xAxis->range(), values = m_plot->yAxis->range();
  twell::views::Window window;
  window.col_begin = clampIndex(std::floor((keys.lower + 0.5) / m_keyScale), m_source.cols);
  window.col_end = clampIndex(std::ceil((keys.upper + 0.5) / m_keyScale), m_source.cols);
  window.row_begin = clampIndex(std::floor((values.lower + 0.5) / m_valueScale), m_source.rows);
  window.row_end = clampIndex(std::ceil((values.upper + 0.5) / m_valueScale), m_source.rows);
  if (window.col_end <= window.col_begin || window.row_end <= window.row_begin) return;
  const QRect pixels = m_plot->axisRect()->rect();
  twell::views::PooledGrid pooled =
      twell::views::pool_max(m_source, window, std::max(pixels.height(), 64), std::max(pixels.width(), 64));
  if (m_hasPooled && pooled.rows_per_cell == m_pooled.rows_per_cell &&
      pooled.cols_per_cell == m_pooled.cols_per_cell &&
      pooled.window.col_begin == m_pooled.window.col_begin &&
      pooled.window.col_end == m_pooled.window.col_end &&
      pooled.window.row_begin == m_pooled.window.row_begin &&
      pooled.window.row_end == m_pooled.window.row_end)
    return;
  m_pooled = std::move(pooled);
  m_hasPooled = true;
  const twell::views::Grid& g = m_pooled.grid;
  // Cell centres in axis coordinates: a pooled cell of w source cells starting at c has its centre
  // at c * scale + (w * scale - 1) / 2.
  auto centre = [](std::uint32_t first, std::uint32_t width, double scale) {
    return first * scale + (width * scale - 1.0) / 2.0;
  };
  const double key0 = centre(m_pooled.window.col_begin, m_pooled.cols_per_cell, m_keyScale);
  const double keyStep = m_pooled.cols_per_cell * m_keyScale;
  const double value0 = centre(m_pooled.window.row_begin, m_pooled.rows_per_cell, m_valueScale);
  const double valueStep = m_pooled.rows_per_cell * m_valueScale;
  // QCPColorMap derives the cell size from the distance between the first and last centres, so a
  // single row or column is drawn as two half cells with the same value.
  const int keyCopies = g.cols == 1 ? 2 : 1, valueCopies = g.rows == 1 ? 2 : 1;
  const QCPRange keyRange = keyCopies == 2 ? QCPRange(key0 - keyStep / 4, key0 + keyStep / 4)
                                           : QCPRange(key0, key0 + keyStep * (int(g.cols) - 1));
  const QCPRange valueRange = valueCopies == 2 ? QCPRange(value0 - valueStep / 4, value0 + valueStep / 4)
                                               : QCPRange(value0, value0 + valueStep * (int(g.rows) - 1));
  auto* data = new QCPColorMapData(int(g.cols) * keyCopies, int(g.rows) * valueCopies, keyRange, valueRange);
  const double floorValue = m_map->dataRange().lower;
  for (std::uint32_t r = 0; r < g.rows * valueCopies; ++r)
    for (std::uint32_t c = 0; c < g.cols * keyCopies; ++c) {
      const std::uint32_t sr = r / valueCopies, sc = c / keyCopies;
      const bool flagged = g.flag(sr, sc);
      data->setCell(int(c), int(r), flagged ? floorValue : std::max(g.at(sr, sc), floorValue));
      if (flagged) data->setAlpha(int(c), int(r), 0);
    }
  m_map->setData(data, false);
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace twellscope
