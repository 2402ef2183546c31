// SPDX-License-Identifier: GPL-3.0-or-later
#include "heatmap_view.hpp"

#include "format.hpp"
#include "grid_map.hpp"
#include "report_document.hpp"

namespace twellscope {

HeatmapView::HeatmapView(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Sparsity heatmap"), parent), m_document(document) {
  m_grid = new GridMap(plot(), tr("firing rate (log)"), QBrush(QColor(120, 120, 120), Qt::BDiagPattern));
  plot()->xAxis->setLabel(tr("neuron"));
  plot()->yAxis->setLabel(tr("layer  (hatched: dead neurons, never fired)"));
  plot()->yAxis->setRangeReversed(true);
  m_selection = new QCPItemRect(plot());
  m_selection->topLeft->setTypeX(QCPItemPosition::ptAxisRectRatio);
  m_selection->bottomRight->setTypeX(QCPItemPosition::ptAxisRectRatio);
  m_selection->setPen(QPen(QColor(0, 170, 255), 2));
  m_selection->setBrush(Qt::NoBrush);
  m_selection->setClipToAxisRect(true);
  keepItem(m_selection);
  connect(document, &ReportDocument::reportChanged, this, &HeatmapView::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &HeatmapView::showSelection);
  rebuild();
}

void HeatmapView::rebuild() {
  if (!m_document->hasReport() || m_document->firingRates().cols == 0) {
    m_grid->clear();
    setEmptyMessage(tr("No per-neuron statistics in this report"));
    m_selection->setVisible(false);
    plot()->replot();
    return;
  }
  setEmptyMessage({});
  m_grid->setSource(m_document->firingRates(), 1, 1);
  const int layers = int(m_document->report().layers.size());
  if (layers <= 64) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    const int step = layers > 32 ? 2 : 1;
    for (int i = 0; i < layers; i += step) ticker->addTick(i, m_document->layerLabel(i));
    plot()->yAxis->setTicker(ticker);
  } else {
    plot()->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  resetView();
  showSelection();
}

void HeatmapView::resetView() {
  if (!m_grid->hasData()) return;
  plot()->xAxis->setRange(m_grid->fullKeyRange());
  plot()->yAxis->setRange(m_grid->fullValueRange());
  m_grid->refresh();
  plot()->replot();
}

void HeatmapView::showSelection() {
  const int layer = m_document->selectedLayer();
  m_selection->setVisible(m_grid->hasData() && layer >= 0);
  m_selection->topLeft->setCoords(0, layer - 0.5);
  m_selection->bottomRight->setCoords(1, layer + 0.5);
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

QString HeatmapView::describe(double key, double value) const {
  const int neuron = m_grid->columnAt(key), row = m_grid->rowAt(value);
  if (!m_document->hasReport() || neuron < 0 || row < 0) return {};
  const twell::LayerSparsityStats& s = m_document->report().layers[std::size_t(row)].sparsity;
  if (std::size_t(neuron) >= s.neuron_fire_counts.size()) return {};
  const std::uint32_t fires = s.neuron_fire_counts[std::size_t(neuron)];
  QString text = tr("%1 · neuron %2: ").arg(m_document->layerLabel(row)).arg(neuron);
  if (fires == 0)
    text += tr("dead (never fired on %1 tokens)").arg(s.tokens);
  else
    text += tr("fired on %1 of %2 tokens, rate %3")
                .arg(fires)
                .arg(s.tokens)
                .arg(formatNumber(double(fires) / double(std::max<std::uint64_t>(s.tokens, 1)), 6));
  const twell::views::PooledGrid& pooled = m_grid->pooled();
  if (pooled.cols_per_cell > 1)
    text += tr("  (a pixel shows the max of %1 neurons: zoom in)").arg(pooled.cols_per_cell);
  return text;
}

void HeatmapView::clicked(double key, double value) {
  const int neuron = m_grid->columnAt(key), row = m_grid->rowAt(value);
  if (neuron < 0 || row < 0) return;
  m_document->selectNeuron(row, neuron);
  setReadout(describe(key, value));
}

}  // namespace twellscope
