// SPDX-License-Identifier: GPL-3.0-or-later
#include "report_document.hpp"

namespace twellscope {

ReportDocument::ReportDocument(QObject* parent) : QObject(parent) {}

void ReportDocument::setReport(std::shared_ptr<const twell::Report> report, const QString& sourcePath) {
  m_report = std::move(report);
  m_sourcePath = sourcePath;
  m_rows.clear();
  m_overview = {};
  m_breakEven = {};
  m_firingRates = {};
  if (m_report) {
    m_rows = twell::views::layer_rows(*m_report);
    m_overview = twell::views::overview(*m_report);
    m_breakEven = twell::views::estimate_break_even(*m_report);
    m_firingRates = twell::views::firing_rate_grid(*m_report);
  }
  m_selectedLayer = m_report && !m_report->layers.empty() ? 0 : -1;
  m_selectedNeuron = -1;
  emit reportChanged();
  emit selectedLayerChanged(m_selectedLayer);
}

void ReportDocument::setComparison(std::shared_ptr<const twell::Report> report, const QString& sourcePath) {
  m_comparison = std::move(report);
  m_comparisonPath = sourcePath;
  emit comparisonChanged();
}

QString ReportDocument::layerLabel(int position) const {
  if (!m_report || position < 0 || position >= int(m_report->layers.size())) return QString();
  return QStringLiteral("L%1").arg(m_report->layers[std::size_t(position)].index);
}

void ReportDocument::selectLayer(int position) {
  if (!m_report || position < -1 || position >= int(m_report->layers.size()) || position == m_selectedLayer)
    return;
  m_selectedLayer = position;
  emit selectedLayerChanged(position);
}

void ReportDocument::selectNeuron(int position, int neuron) {
  selectLayer(position);
  if (neuron == m_selectedNeuron) return;
  m_selectedNeuron = neuron;
  emit selectedNeuronChanged(position, neuron);
}

}  // namespace twellscope
