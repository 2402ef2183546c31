// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

#include "plot_page.hpp"

class QLabel;
class QTableView;
class QSortFilterProxyModel;

namespace twellscope {

class CompareModel;
class ReportDocument;

/// Per-layer speedup of the report on screen (A) and the comparison (B) as grouped bars.
class CompareSpeedupPlot : public PlotPage {
  Q_OBJECT

 public:
  CompareSpeedupPlot(ReportDocument* document, CompareModel* model, QWidget* parent = nullptr);

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;

 private:
  void rebuild();

  ReportDocument* m_document;
  CompareModel* m_model;
  QCPBars *m_a, *m_b;
};

/// Two reports side by side: which one is which, the per-layer deltas, and their speedups.
class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(ReportDocument* document, QWidget* parent = nullptr);
  CompareModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  CompareSpeedupPlot* plot() const { return m_plot; }
  /// The whole-report ratios (B / A) and what makes them compare unlike things, as plain text.
  QString summaryText() const;

 signals:
  /// The user asked to open a second report (the main window owns file dialogs and errors).
  void openComparisonRequested();

 private:
  void rebuild();

  ReportDocument* m_document;
  CompareModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QLabel* m_sources;
  QLabel* m_summary;
  QTableView* m_table;
  CompareSpeedupPlot* m_plot;
};

}  // namespace twellscope
