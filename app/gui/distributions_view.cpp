// SPDX-License-Identifier: GPL-3.0-or-later
#include "distributions_view.hpp"

#include <QVBoxLayout>
#include <cmath>

#include "format.hpp"
#include "plot_style.hpp"
#include "report_document.hpp"

namespace twellscope {
namespace {

constexpr std::size_t kMaxHistogramBins = 200;
// Bars on the log count axis start here, below any count of one.
constexpr double kLogBarBase = 0.5;

const twell::LayerSparsityStats* selectedStats(const ReportDocument* document) {
  const int layer = document->selectedLayer();
  if (!document->hasReport() || layer < 0) return nullptr;
  return &document->report().layers[std::size_t(layer)].sparsity;
}

}  // namespace

NnzHistogramPlot::NnzHistogramPlot(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Non-zeros per token"), parent), m_document(document) {
  m_bars = new QCPBars(plot()->xAxis, plot()->yAxis);
  m_bars->setPen(Qt::NoPen);
  m_bars->setBrush(pathColor(QStringLiteral("twell")).lighter(120));
  plot()->xAxis->setLabel(tr("non-zeros (fired neurons) per token"));
  plot()->yAxis->setLabel(tr("tokens"));
  connect(document, &ReportDocument::reportChanged, this, &NnzHistogramPlot::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &NnzHistogramPlot::rebuild);
  rebuild();
}

void NnzHistogramPlot::rebuild() {
  clearTransientItems();
  const twell::LayerSparsityStats* stats = selectedStats(m_document);
  m_series =
      stats ? twell::views::nnz_histogram_series(*stats, kMaxHistogramBins) : twell::views::HistogramSeries{};
  QVector<double> keys, values;
  for (std::size_t i = 0; i < m_series.bin_start.size(); ++i) {
    keys << m_series.bin_start[i] + (m_series.bin_width - 1) / 2.0;
    values << m_series.counts[i];
  }
  m_bars->setData(keys, values, true);
  m_bars->setWidth(m_series.bin_width);
  if (stats && !keys.isEmpty()) {
    setEmptyMessage({});
    const QString layer = m_document->layerLabel(m_document->selectedLayer());
    setReadout(tr("%1: mean %2, p99 %3, max %4 non-zeros per token")
                   .arg(layer)
                   .arg(m_series.mean, 0, 'f', 1)
                   .arg(m_series.p99, 0, 'f', 0)
                   .arg(m_series.max, 0, 'f', 0));
    addMarker(plot(), Qt::Vertical, m_series.mean, QColor(0, 130, 0),
              tr("mean %1").arg(m_series.mean, 0, 'f', 1), 0.02);
    addMarker(plot(), Qt::Vertical, m_series.p99, QColor(150, 0, 150), tr("p99 %1").arg(m_series.p99), 0.10);
    addMarker(plot(), Qt::Vertical, m_series.max, QColor(200, 0, 0), tr("max %1").arg(m_series.max), 0.18);
  } else {
    setEmptyMessage(m_document->hasReport() ? tr("No histogram for this layer") : QString());
  }
  resetView();
}

void NnzHistogramPlot::resetView() {
  plot()->rescaleAxes();
  // Room right of the max marker for its label, which starts at the line.
  plot()->xAxis->setRange(std::min(-0.5, plot()->xAxis->range().lower),
                          std::max(m_series.max * 1.12 + 1, plot()->xAxis->range().upper));
  plot()->yAxis->setRangeLower(0);
  plot()->yAxis->scaleRange(1.1, 0);
  plot()->replot();
}

QString NnzHistogramPlot::describe(double key, double) const {
  if (m_series.bin_start.empty() || key < -0.5) return {};
  const auto bin = std::size_t(std::floor((key + 0.5) / m_series.bin_width));
  if (bin >= m_series.counts.size()) return {};
  const double first = m_series.bin_start[bin], last = first + m_series.bin_width - 1;
  const QString range = first == last ? QString::number(first) : QStringLiteral("%1–%2").arg(first).arg(last);
  return tr("%1 non-zeros: %2 tokens").arg(range).arg(m_series.counts[bin], 0, 'f', 0);
}

TileOccupancyPlot::TileOccupancyPlot(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Tile occupancy vs TwELL capacity"), parent), m_document(document) {
  m_bars = new QCPBars(plot()->xAxis, plot()->yAxis);
  m_bars->setPen(Qt::NoPen);
  m_bars->setBrush(QColor(110, 110, 160));
  m_bars->setWidth(1);
  m_bars->setBaseValue(kLogBarBase);
  plot()->xAxis->setLabel(tr("non-zeros in one (token, 256-neuron tile)"));
  plot()->yAxis->setLabel(tr("(token, tile) pairs"));
  plot()->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot()->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  connect(document, &ReportDocument::reportChanged, this, &TileOccupancyPlot::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &TileOccupancyPlot::rebuild);
  rebuild();
}

void TileOccupancyPlot::rebuild() {
  clearTransientItems();
  const twell::LayerSparsityStats* stats = selectedStats(m_document);
  m_series = stats ? twell::views::tile_occupancy_series(*stats) : twell::views::TileOccupancySeries{};
  QVector<double> keys, values;
  for (std::size_t i = 0; i < m_series.counts.size(); ++i)
    if (m_series.counts[i] > 0) {  // a log axis has no zero
      keys << m_series.occupancy[i];
      values << m_series.counts[i];
    }
  m_bars->setData(keys, values, true);
  setEmptyMessage(stats && keys.isEmpty() ? tr("No tile statistics for this layer") : QString());
  const QColor colors[] = {QColor(200, 0, 0), QColor(200, 120, 0), QColor(0, 130, 0)};
  double ratio = 0.02;
  std::size_t i = 0;
  for (const auto& capacity : m_series.capacities) {
    addMarker(plot(), Qt::Vertical, capacity.capacity + 0.5, colors[i++ % 3],
              tr("C=%1: capacity %2, %3 overflow tiles")
                  .arg(capacity.compression)
                  .arg(capacity.capacity)
                  .arg(capacity.overflow_tiles),
              ratio);
    ratio += 0.08;
  }
  resetView();
}

void TileOccupancyPlot::resetView() {
  double right = 8;
  // Room right of the last capacity line for its label.
  for (const auto& capacity : m_series.capacities) right = std::max(right, double(capacity.capacity) * 1.45);
  if (!m_series.occupancy.empty()) right = std::max(right, m_series.occupancy.back() + 2);
  plot()->xAxis->setRange(-0.5, right);
  double top = 10;
  for (double c : m_series.counts) top = std::max(top, c * 3);
  plot()->yAxis->setRange(kLogBarBase, top);
  plot()->replot();
}

QString TileOccupancyPlot::describe(double key, double) const {
  const double k = std::round(key);
  if (k < 0 || m_series.occupancy.empty() || k > m_series.occupancy.back() + 1) return {};
  const double count = k <= m_series.occupancy.back() ? m_series.counts[std::size_t(k)] : 0;
  QString text = tr("%1 non-zeros in a tile: %2 (token, tile) pairs").arg(k).arg(count, 0, 'f', 0);
  for (const auto& capacity : m_series.capacities)
    text +=
        tr(" · C=%1 %2").arg(capacity.compression).arg(k <= capacity.capacity ? tr("fits") : tr("overflows"));
  return text;
}

DistributionsView::DistributionsView(ReportDocument* document, QWidget* parent) : QWidget(parent) {
  m_histogram = new NnzHistogramPlot(document, this);
  m_occupancy = new TileOccupancyPlot(document, this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_histogram);
  layout->addWidget(m_occupancy);
}

}  // namespace twellscope
