// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

class QCheckBox;
class QLineEdit;
class QTableView;

namespace twellscope {

class LayerFilterProxy;
class LayerTableModel;
class ReportDocument;

/// The layer table: sortable, filterable; its current row is the shared layer selection.
class LayerTableView : public QWidget {
  Q_OBJECT

 public:
  LayerTableView(ReportDocument* document, QWidget* parent = nullptr);
  LayerTableModel* model() const { return m_model; }
  LayerFilterProxy* proxy() const { return m_proxy; }
  QTableView* table() const { return m_table; }
  QLineEdit* filterEdit() const { return m_filter; }

 private:
  void rebuild();
  void showSelection(int position);
  void onCurrentChanged();

  ReportDocument* m_document;
  LayerTableModel* m_model;
  LayerFilterProxy* m_proxy;
  QLineEdit* m_filter;
  QCheckBox *m_belowBreakEven, *m_overflowing;
  QTableView* m_table;
};

}  // namespace twellscope
