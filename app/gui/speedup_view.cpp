// SPDX-License-Identifier: GPL-3.0-or-later
#include "speedup_view.hpp"

#include <cmath>

#include "format.hpp"
#include "plot_style.hpp"
#include "report_document.hpp"

namespace twellscope {
namespace {
constexpr double kPickRadiusPixels = 10;
constexpr int kFitSamples = 100;
}  // namespace

SpeedupView::SpeedupView(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Speedup vs density"), parent), m_document(document) {
  m_fit = new QCPGraph(plot()->xAxis, plot()->yAxis);
  m_fit->setName(tr("fitted: twell/dense time linear in density"));
  m_fit->setPen(QPen(QColor(150, 150, 150), 1.5, Qt::DotLine));
  m_points = new QCPGraph(plot()->xAxis, plot()->yAxis);
  m_points->setName(tr("layers (measured)"));
  m_points->setLineStyle(QCPGraph::lsNone);
  m_points->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, pathColor(QStringLiteral("twell")), 8));
  m_selected = new QCPGraph(plot()->xAxis, plot()->yAxis);
  m_selected->setName(tr("selected layer"));
  m_selected->setLineStyle(QCPGraph::lsNone);
  m_selected->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(selectionColor(), 2.5), Qt::NoBrush, 16));
  plot()->xAxis->setLabel(tr("activation density (fraction of neurons firing)"));
  plot()->yAxis->setLabel(tr("speedup (dense / TwELL)"));
  plot()->legend->setVisible(true);
  // Bottom right stays empty: layers worth profiling sit above speedup 1 at low density.
  plot()->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  connect(document, &ReportDocument::reportChanged, this, &SpeedupView::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &SpeedupView::showSelection);
  rebuild();
}

void SpeedupView::rebuild() {
  clearTransientItems();
  QVector<double> x, y;
  double widest = 0;
  for (const auto& row : m_document->layerRows()) {
    widest = std::max(widest, row.density);
    if (!row.speedup) continue;
    x << row.density;
    y << *row.speedup;
  }
  // Keys are not sorted by layer any more once sorted by density; the pick maps back through rows.
  m_points->setData(x, y);
  const twell::views::BreakEven& fit = m_document->breakEven();
  QVector<double> fx, fy;
  const double right = std::max(widest * 1.3, fit.density.value_or(0) * 1.4);
  for (int i = 0; i <= kFitSamples && right > 0; ++i) {
    const double d = right * i / kFitSamples;
    if (const auto s = fit.predicted_speedup(d)) {
      fx << d;
      fy << *s;
    }
  }
  m_fit->setData(fx, fy, true);
  m_fit->setVisible(!fx.isEmpty());
  addMarker(plot(), Qt::Horizontal, 1.0, QColor(120, 120, 120), tr("speedup 1: dense and TwELL equal"), 0.02);
  if (fit.density)
    addMarker(plot(), Qt::Vertical, *fit.density, QColor(200, 0, 0),
              tr("break-even density %1").arg(formatPercent(*fit.density, 2)), 0.05);
  // The threshold the dispatch applied, beside the crossing this run's own layers fit.
  if (const double threshold = dispatchThreshold(); threshold > 0)
    addMarker(plot(), Qt::Vertical, threshold, QColor(40, 140, 70),
              tr("dispatch: TwELL below %1").arg(formatPercent(threshold, 2)), 0.14);
  if (m_document->hasReport() && x.isEmpty())
    setEmptyMessage(tr("No layer was timed on both paths: run with the dense and TwELL paths"));
  else if (m_document->hasReport() && !fit.density)
    setEmptyMessage(tr("Break-even not reached within density 0–100 % (or too few layers to fit)"));
  else
    setEmptyMessage({});
  resetView();
  showSelection();
}

double SpeedupView::dispatchThreshold() const {
  if (!m_document->hasReport() || !m_document->report().dispatch_break_even) return 0;
  return m_document->report().dispatch_break_even->density;
}

void SpeedupView::resetView() {
  bool found = false;
  const QCPRange keys = m_points->getKeyRange(found);
  const double breakEven = std::max(m_document->breakEven().density.value_or(0), dispatchThreshold());
  plot()->xAxis->setRange(0, std::max({found ? keys.upper * 1.2 : 0.01, breakEven * 1.4, 1e-4}));
  const QCPRange values = m_points->getValueRange(found);
  plot()->yAxis->setRange(0, std::max(found ? values.upper * 1.2 : 2.0, 1.3));
  plot()->replot();
}

void SpeedupView::showSelection() {
  m_selected->data()->clear();
  const int layer = m_document->selectedLayer();
  if (layer >= 0 && layer < int(m_document->layerRows().size())) {
    const auto& row = m_document->layerRows()[std::size_t(layer)];
    if (row.speedup) m_selected->addData(row.density, *row.speedup);
  }
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

int SpeedupView::layerNear(double key, double value) const {
  const double px = plot()->xAxis->coordToPixel(key), py = plot()->yAxis->coordToPixel(value);
  int best = -1;
  double bestDistance = kPickRadiusPixels;
  const auto& rows = m_document->layerRows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].speedup) continue;
    const double dx = plot()->xAxis->coordToPixel(rows[i].density) - px;
    const double dy = plot()->yAxis->coordToPixel(*rows[i].speedup) - py;
    const double distance = std::hypot(dx, dy);
    if (distance <= bestDistance) {
      bestDistance = distance;
      best = int(i);
    }
  }
  return best;
}

QString SpeedupView::describe(double key, double value) const {
  const int layer = layerNear(key, value);
  if (layer < 0) return {};
  const auto& row = m_document->layerRows()[std::size_t(layer)];
  QString text = tr("%1: density %2, speedup %3 (dense %4, TwELL %5)")
                     .arg(m_document->layerLabel(layer), formatPercent(row.density, 3),
                          formatSpeedup(*row.speedup), formatOptional(row.dense_us, formatMicroseconds),
                          formatOptional(row.twell_us, formatMicroseconds));
  if (const auto predicted = m_document->breakEven().predicted_speedup(row.density))
    text += tr(", fit predicts %1").arg(formatSpeedup(*predicted));
  return text;
}

void SpeedupView::clicked(double key, double value) {
  const int layer = layerNear(key, value);
  if (layer >= 0) m_document->selectLayer(layer);
}

}  // namespace twellscope
