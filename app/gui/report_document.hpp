// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QObject>
#include <QString>
#include <memory>
#include <vector>

#include "twell/report.hpp"
#include "twell/report_views.hpp"

namespace twellscope {

/// The report on screen, the one it is compared with, and the selection every view shares. Views
/// read it and never change the report; selecting a layer anywhere selects it everywhere.
class ReportDocument : public QObject {
  Q_OBJECT

 public:
  explicit ReportDocument(QObject* parent = nullptr);

  bool hasReport() const { return m_report != nullptr; }
  /// Only valid while hasReport().
  const twell::Report& report() const { return *m_report; }
  std::shared_ptr<const twell::Report> reportPointer() const { return m_report; }
  /// Where the report was read from; empty for a run not yet saved.
  QString sourcePath() const { return m_sourcePath; }

  const std::vector<twell::views::LayerRow>& layerRows() const { return m_rows; }
  const twell::views::Overview& overview() const { return m_overview; }
  const twell::views::BreakEven& breakEven() const { return m_breakEven; }
  const twell::views::Grid& firingRates() const { return m_firingRates; }

  void setReport(std::shared_ptr<const twell::Report> report, const QString& sourcePath);
  void setSourcePath(const QString& path) { m_sourcePath = path; }

  bool hasComparison() const { return m_comparison != nullptr; }
  const twell::Report& comparison() const { return *m_comparison; }
  QString comparisonPath() const { return m_comparisonPath; }
  void setComparison(std::shared_ptr<const twell::Report> report, const QString& sourcePath);

  /// Position in report().layers of the selected layer, -1 when none.
  int selectedLayer() const { return m_selectedLayer; }
  /// Neuron selected in the heatmap, -1 when none.
  int selectedNeuron() const { return m_selectedNeuron; }
  /// "L<index>" for a position in report().layers.
  QString layerLabel(int position) const;

 public slots:
  void selectLayer(int position);
  void selectNeuron(int position, int neuron);

 signals:
  void reportChanged();
  void comparisonChanged();
  void selectedLayerChanged(int position);
  void selectedNeuronChanged(int position, int neuron);

 private:
  std::shared_ptr<const twell::Report> m_report, m_comparison;
  QString m_sourcePath, m_comparisonPath;
  std::vector<twell::views::LayerRow> m_rows;
  twell::views::Overview m_overview;
  twell::views::BreakEven m_breakEven;
  twell::views::Grid m_firingRates;
  int m_selectedLayer = -1, m_selectedNeuron = -1;
};

}  // namespace twellscope
