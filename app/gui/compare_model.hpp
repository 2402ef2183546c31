// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QAbstractTableModel>
#include <vector>

#include "twell/report_views.hpp"

namespace twellscope {

/// Per-layer deltas of report B (the comparison) against report A (the one on screen).
class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    LayerColumn,
    DensityAColumn,
    DensityBColumn,
    DensityDeltaColumn,
    TwellAColumn,
    TwellBColumn,
    TwellDeltaColumn,
    SpeedupAColumn,
    SpeedupBColumn,
    SpeedupDeltaColumn,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1 };

  explicit CompareModel(QObject* parent = nullptr);
  void setDeltas(std::vector<twell::views::LayerDelta> deltas);
  const std::vector<twell::views::LayerDelta>& deltas() const { return m_deltas; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<twell::views::LayerDelta> m_deltas;
};

}  // namespace twellscope
