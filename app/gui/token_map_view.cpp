// SPDX-License-Identifier: GPL-3.0-or-later
#include "token_map_view.hpp"

#include <algorithm>

#include "format.hpp"
#include "grid_map.hpp"
#include "report_document.hpp"

namespace twellscope {

TokenMapView::TokenMapView(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Token × neuron map"), parent), m_document(document) {
  m_grid = new GridMap(plot(), tr("fraction fired (log)"), QBrush(Qt::white));
  plot()->xAxis->setLabel(tr("neuron"));
  plot()->yAxis->setLabel(tr("token"));
  plot()->yAxis->setRangeReversed(true);
  connect(document, &ReportDocument::reportChanged, this, &TokenMapView::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &TokenMapView::rebuild);
  rebuild();
}

void TokenMapView::rebuild() {
  const int layer = m_document->selectedLayer();
  if (!m_document->hasReport() || layer < 0 ||
      m_document->report().layers[std::size_t(layer)].sparsity.map.cells.empty()) {
    m_grid->clear();
    setEmptyMessage(m_document->hasReport() ? tr("This layer has no token × neuron map") : QString());
    plot()->replot();
    return;
  }
  const twell::TokenNeuronMap& map = m_document->report().layers[std::size_t(layer)].sparsity.map;
  setEmptyMessage({});
  m_cell = twell::views::token_map_cell_size(map);
  m_grid->setSource(twell::views::token_map_grid(map), m_cell.neurons, m_cell.tokens);
  plot()->xAxis->setLabel(tr("neuron (%1 per map cell)").arg(m_cell.neurons));
  plot()->yAxis->setLabel(tr("token of %1 (%2 per map cell) · %3")
                              .arg(map.tokens)
                              .arg(m_cell.tokens)
                              .arg(m_document->layerLabel(layer)));
  resetView();
}

void TokenMapView::resetView() {
  if (!m_grid->hasData()) return;
  plot()->xAxis->setRange(m_grid->fullKeyRange());
  plot()->yAxis->setRange(m_grid->fullValueRange());
  m_grid->refresh();
  plot()->replot();
}

QString TokenMapView::describe(double key, double value) const {
  const int column = m_grid->columnAt(key), row = m_grid->rowAt(value);
  const int layer = m_document->selectedLayer();
  if (column < 0 || row < 0 || layer < 0) return {};
  const twell::TokenNeuronMap& map = m_document->report().layers[std::size_t(layer)].sparsity.map;
  const std::uint32_t t0 = std::uint32_t(row) * m_cell.tokens, n0 = std::uint32_t(column) * m_cell.neurons;
  const std::uint32_t t1 = std::min(t0 + m_cell.tokens, map.tokens) - 1,
                      n1 = std::min(n0 + m_cell.neurons, map.neurons) - 1;
  const QString where = (t0 == t1 ? tr("token %1").arg(t0) : tr("tokens %1–%2").arg(t0).arg(t1)) +
                        QStringLiteral(", ") +
                        (n0 == n1 ? tr("neuron %1").arg(n0) : tr("neurons %1–%2").arg(n0).arg(n1));
  const twell::views::Grid& grid = m_grid->source();
  if (grid.flag(std::uint32_t(row), std::uint32_t(column))) return where + tr(": nothing fired");
  const bool single = t0 == t1 && n0 == n1;
  return where +
         (single
              ? tr(": fired")
              : tr(": %1 fired").arg(formatPercent(grid.at(std::uint32_t(row), std::uint32_t(column)), 1)));
}

}  // namespace twellscope
