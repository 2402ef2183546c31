// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <cstdint>
#include <memory>

#include "twell/report.hpp"

namespace twellscope {

/// Every timeline record of a report, one per row.
class KernelTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    NameColumn,
    KindColumn,
    PhaseColumn,
    LayerColumn,
    PathColumn,
    OpColumn,
    RepetitionColumn,
    StartColumn,
    DurationColumn,
    GridColumn,
    BlockColumn,
    RegistersColumn,
    SharedColumn,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1, RecordRole };

  explicit KernelTableModel(QObject* parent = nullptr);
  void setReport(std::shared_ptr<const twell::Report> report);
  const twell::KernelRecord& record(int row) const { return m_report->timeline[std::size_t(row)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const twell::Report> m_report;
  std::uint64_t m_originNs = 0;
};

/// Filters records by name substring, layer and path.
class KernelFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit KernelFilterProxy(QObject* parent = nullptr);
  void setNameFilter(const QString& text);
  /// -2: any layer; -1: records outside any layer.
  void setLayerFilter(int layer);
  /// Empty: any path.
  void setPathFilter(const QString& path);

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  QString m_name, m_path;
  int m_layer = -2;
};

}  // namespace twellscope
