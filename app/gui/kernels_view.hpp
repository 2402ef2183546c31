// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

#include "plot_page.hpp"
#include "twell/report_views.hpp"

class QComboBox;
class QLineEdit;
class QTableView;

namespace twellscope {

class KernelFilterProxy;
class KernelTableModel;
class ReportDocument;

/// The layer_ffn records of one repetition: dense and TwELL as two tracks aligned by layer.
class TimelinePlot : public PlotPage {
  Q_OBJECT

 public:
  TimelinePlot(ReportDocument* document, QWidget* parent = nullptr);
  const twell::views::TimelineLayout& layout() const { return m_layout; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;
  void clicked(double key, double value) override;

 private:
  void rebuild();
  void showSelection();
  const twell::views::TimelineSpan* spanAt(double key, double value) const;

  ReportDocument* m_document;
  twell::views::TimelineLayout m_layout;
  QCPItemRect* m_selection;
};

/// Every record in a sortable, filterable table, with the timeline below.
class KernelsView : public QWidget {
  Q_OBJECT

 public:
  KernelsView(ReportDocument* document, QWidget* parent = nullptr);
  KernelTableModel* model() const { return m_model; }
  KernelFilterProxy* proxy() const { return m_proxy; }
  QTableView* table() const { return m_table; }
  TimelinePlot* timeline() const { return m_timeline; }

 private:
  void rebuild();
  void applyFilters();

  ReportDocument* m_document;
  KernelTableModel* m_model;
  KernelFilterProxy* m_proxy;
  QLineEdit* m_name;
  QComboBox *m_layer, *m_path;
  QTableView* m_table;
  TimelinePlot* m_timeline;
};

}  // namespace twellscope
