// SPDX-License-Identifier: GPL-3.0-or-later
#include "timing_view.hpp"

#include <QVBoxLayout>
#include <cmath>

#include "format.hpp"
#include "plot_style.hpp"
#include "report_document.hpp"

namespace twellscope {
namespace {

QSharedPointer<QCPAxisTickerText> layerTicker(const ReportDocument* document) {
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const int layers = int(document->layerRows().size());
  const int step = std::max(1, layers / 32);
  for (int i = 0; i < layers; i += step) ticker->addTick(i, document->layerLabel(i));
  return ticker;
}

}  // namespace

LayerTimingPlot::LayerTimingPlot(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Per-layer FFN time"), parent), m_document(document) {
  auto* group = new QCPBarsGroup(plot());
  group->setSpacingType(QCPBarsGroup::stAbsolute);
  group->setSpacing(1);
  m_dense = new QCPBars(plot()->xAxis, plot()->yAxis);
  m_twell = new QCPBars(plot()->xAxis, plot()->yAxis);
  for (auto [bars, path, name] :
       {std::tuple{m_dense, "dense", tr("dense")}, std::tuple{m_twell, "twell", tr("TwELL")}}) {
    bars->setName(name);
    bars->setWidth(0.38);
    bars->setPen(Qt::NoPen);
    bars->setBrush(pathColor(QLatin1String(path)));
    bars->setBarsGroup(group);
  }
  m_speedup = new QCPGraph(plot()->xAxis, plot()->yAxis2);
  m_speedup->setName(tr("speedup (right axis)"));
  m_speedup->setPen(QPen(QColor(40, 40, 40), 1.5));
  m_speedup->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
  plot()->yAxis2->setVisible(true);
  plot()->yAxis2->setLabel(tr("speedup (dense / TwELL)"));
  plot()->yAxis->setLabel(tr("median time per repetition (µs)"));
  plot()->xAxis->setLabel(tr("layer"));
  plot()->legend->setVisible(true);
  placeLegendAbovePlot(plot());
  // Zoom and pan along layers only; the time axis follows the data.
  plot()->axisRect()->setRangeZoom(Qt::Horizontal);
  plot()->axisRect()->setRangeDrag(Qt::Horizontal);
  // Speedup 1 on the right axis: above it TwELL is faster.
  auto* breakEven = new QCPItemStraightLine(plot());
  for (QCPItemPosition* point : {breakEven->point1, breakEven->point2}) {
    point->setAxes(plot()->xAxis, plot()->yAxis2);
    point->setTypeX(QCPItemPosition::ptAxisRectRatio);
  }
  breakEven->point1->setCoords(0, 1);
  breakEven->point2->setCoords(1, 1);
  breakEven->setPen(QPen(QColor(120, 120, 120), 1, Qt::DashLine));
  keepItem(breakEven);
  m_selection = new QCPItemRect(plot());
  m_selection->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  m_selection->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  m_selection->setPen(QPen(selectionColor(), 2));
  keepItem(m_selection);
  connect(document, &ReportDocument::reportChanged, this, &LayerTimingPlot::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &LayerTimingPlot::showSelection);
  rebuild();
}

void LayerTimingPlot::rebuild() {
  QVector<double> keys, dense, twell, speedupKeys, speedup;
  const auto& rows = m_document->layerRows();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    keys << double(i);
    dense << rows[i].dense_us.value_or(0);
    twell << rows[i].twell_us.value_or(0);
    if (rows[i].speedup) {
      speedupKeys << double(i);
      speedup << *rows[i].speedup;
    }
  }
  m_dense->setData(keys, dense, true);
  m_twell->setData(keys, twell, true);
  m_speedup->setData(speedupKeys, speedup, true);
  plot()->xAxis->setTicker(layerTicker(m_document));
  const bool timed =
      std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.dense_us || r.twell_us; });
  setEmptyMessage(m_document->hasReport() && !timed ? tr("No layer timings in this report") : QString());
  resetView();
  showSelection();
}

void LayerTimingPlot::resetView() {
  plot()->xAxis->setRange(-0.7, std::max<double>(m_document->layerRows().size(), 1) - 0.3);
  bool found = false;
  QCPRange times = m_dense->getValueRange(found);
  bool foundTwell = false;
  const QCPRange twellTimes = m_twell->getValueRange(foundTwell);
  if (foundTwell) times.expand(twellTimes);
  plot()->yAxis->setRange(0, (found || foundTwell) && times.upper > 0 ? times.upper * 1.15 : 1);
  bool foundSpeedup = false;
  const QCPRange s = m_speedup->getValueRange(foundSpeedup);
  plot()->yAxis2->setRange(0, foundSpeedup ? std::max(s.upper * 1.15, 1.2) : 2);
  plot()->replot();
}

void LayerTimingPlot::showSelection() {
  const int layer = m_document->selectedLayer();
  m_selection->setVisible(layer >= 0);
  m_selection->topLeft->setCoords(layer - 0.48, 0);
  m_selection->bottomRight->setCoords(layer + 0.48, 1);
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

int LayerTimingPlot::layerAt(double key) const {
  const int layer = int(std::lround(key));
  return layer >= 0 && layer < int(m_document->layerRows().size()) && std::abs(key - layer) <= 0.45 ? layer
                                                                                                    : -1;
}

QString LayerTimingPlot::describe(double key, double) const {
  const int layer = layerAt(key);
  if (layer < 0) return {};
  const twell::views::LayerRow& r = m_document->layerRows()[std::size_t(layer)];
  return tr("%1: dense %2, TwELL %3, speedup %4")
      .arg(m_document->layerLabel(layer), formatOptional(r.dense_us, formatMicroseconds),
           formatOptional(r.twell_us, formatMicroseconds), formatOptional(r.speedup, formatSpeedup));
}

void LayerTimingPlot::clicked(double key, double) {
  const int layer = layerAt(key);
  if (layer >= 0) m_document->selectLayer(layer);
}

KernelBreakdownPlot::KernelBreakdownPlot(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Kernels of the selected layer"), parent), m_document(document) {
  plot()->xAxis->setLabel(tr("median time (µs)"));
  plot()->yAxis->setRangeReversed(true);
  placeLegendAbovePlot(plot());
  plot()->axisRect()->setRangeZoom(Qt::Horizontal);
  plot()->axisRect()->setRangeDrag(Qt::Horizontal);
  connect(document, &ReportDocument::reportChanged, this, &KernelBreakdownPlot::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &KernelBreakdownPlot::rebuild);
  rebuild();
}

void KernelBreakdownPlot::rebuild() {
  plot()->clearPlottables();
  const int layer = m_document->selectedLayer();
  m_entries.clear();
  if (m_document->hasReport() && layer >= 0)
    m_entries = twell::views::layer_breakdown(m_document->report(),
                                              m_document->report().layers[std::size_t(layer)].index);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  // One bars plottable per path, so each path has its colour and a legend entry.
  QMap<QString, QCPBars*> byPath;
  for (std::size_t i = 0; i < m_entries.size(); ++i) {
    const auto& e = m_entries[i];
    const QString path = QString::fromStdString(e.path);
    if (!byPath.contains(path)) {
      auto* bars = new QCPBars(plot()->yAxis, plot()->xAxis);
      bars->setName(path);
      bars->setWidth(0.7);
      bars->setPen(Qt::NoPen);
      bars->setBrush(pathColor(path));
      byPath.insert(path, bars);
    }
    byPath[path]->addData(double(i), e.median_us);
    QString label = QString::fromStdString(e.label);
    if (label.size() > 48) label = label.left(45) + QStringLiteral("…");
    ticker->addTick(double(i), label);
  }
  plot()->yAxis->setTicker(ticker);
  plot()->legend->setVisible(!byPath.isEmpty());
  setEmptyMessage(m_document->hasReport() && m_entries.empty() ? tr("No kernel timings for this layer")
                                                               : QString());
  if (layer >= 0 && m_document->hasReport())
    plot()->xAxis->setLabel(tr("median time (µs) · %1").arg(m_document->layerLabel(layer)));
  resetView();
}

void KernelBreakdownPlot::resetView() {
  double longest = 0;
  for (const auto& e : m_entries) longest = std::max(longest, e.median_us);
  plot()->xAxis->setRange(0, longest > 0 ? longest * 1.1 : 1);
  plot()->yAxis->setRange(-0.6, std::max<double>(m_entries.size(), 1) - 0.4);
  plot()->replot();
}

QString KernelBreakdownPlot::describe(double, double value) const {
  const long i = std::lround(value);
  if (i < 0 || i >= long(m_entries.size())) return {};
  const auto& e = m_entries[std::size_t(i)];
  return tr("%1 [%2 %3]: %4")
      .arg(QString::fromStdString(e.label), QString::fromStdString(e.path), QString::fromStdString(e.op),
           formatMicroseconds(e.median_us));
}

TimingView::TimingView(ReportDocument* document, QWidget* parent) : QWidget(parent) {
  m_layers = new LayerTimingPlot(document, this);
  m_breakdown = new KernelBreakdownPlot(document, this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_layers, 3);
  layout->addWidget(m_breakdown, 2);
}

}  // namespace twellscope
