// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <vector>

#include "twell/report_views.hpp"

namespace twellscope {

/// One row per profiled layer (views::layer_rows). Qt::DisplayRole is text; SortRole is the raw
/// number, so sorting is numeric.
class LayerTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    LayerColumn,
    DensityColumn,
    NnzMeanColumn,
    NnzP99Column,
    NnzMaxColumn,
    DeadColumn,
    TileColumn,
    DenseColumn,
    TwellColumn,
    SpeedupColumn,
    ErrorColumn,
    OverflowColumn,
    DispatchColumn,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1, PositionRole };

  explicit LayerTableModel(QObject* parent = nullptr);
  void setRows(std::vector<twell::views::LayerRow> rows);
  const twell::views::LayerRow& row(int position) const { return m_rows[std::size_t(position)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<twell::views::LayerRow> m_rows;
};

/// Filters the layer table by layer label text and two flags.
class LayerFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit LayerFilterProxy(QObject* parent = nullptr);
  void setText(const QString& text);
  void setOnlyBelowBreakEven(bool on);
  void setOnlyOverflowing(bool on);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  QString m_text;
  bool m_belowBreakEven = false, m_overflowing = false;
};

}  // namespace twellscope
