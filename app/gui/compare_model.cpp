// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare_model.hpp"

#include <QBrush>
#include <QColor>
#include <limits>

#include "format.hpp"

namespace twellscope {
namespace {

std::optional<double> valueAt(const twell::views::LayerDelta& d, int column) {
  switch (column) {
    case CompareModel::DensityAColumn:
      return d.density_a;
    case CompareModel::DensityBColumn:
      return d.density_b;
    case CompareModel::DensityDeltaColumn:
      return d.density_delta();
    case CompareModel::TwellAColumn:
      return d.twell_us_a;
    case CompareModel::TwellBColumn:
      return d.twell_us_b;
    case CompareModel::TwellDeltaColumn:
      return d.twell_us_delta();
    case CompareModel::SpeedupAColumn:
      return d.speedup_a;
    case CompareModel::SpeedupBColumn:
      return d.speedup_b;
    case CompareModel::SpeedupDeltaColumn:
      return d.speedup_delta();
  }
  return std::nullopt;
}

QString percentText(double fraction) {
  return formatPercent(fraction, 3);
}
QString speedupDeltaText(double delta) {
  return QString::number(delta, 'f', 3);
}

}  // namespace

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::setDeltas(std::vector<twell::views::LayerDelta> deltas) {
  beginResetModel();
  m_deltas = std::move(deltas);
  endResetModel();
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_deltas.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const twell::views::LayerDelta& d = m_deltas[std::size_t(index.row())];
  const int column = index.column();
  const std::optional<double> value = valueAt(d, column);
  if (role == SortRole) {
    if (column == LayerColumn) return d.layer;
    return value ? *value : -std::numeric_limits<double>::max();
  }
  if (role == Qt::TextAlignmentRole)
    return column == LayerColumn ? int(Qt::AlignLeft | Qt::AlignVCenter)
                                 : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ForegroundRole && value && *value != 0) {
    // Green where B is better: faster TwELL time or higher speedup.
    if (column == TwellDeltaColumn) return QBrush(*value < 0 ? QColor(0, 128, 0) : QColor(178, 34, 34));
    if (column == SpeedupDeltaColumn) return QBrush(*value > 0 ? QColor(0, 128, 0) : QColor(178, 34, 34));
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (column) {
    case LayerColumn:
      return QStringLiteral("L%1").arg(d.layer);
    case DensityAColumn:
    case DensityBColumn:
      return formatOptional(value, percentText);
    case DensityDeltaColumn:
      return formatDelta(value, percentText);
    case TwellAColumn:
    case TwellBColumn:
      return formatOptional(value, formatMicroseconds);
    case TwellDeltaColumn:
      return formatDelta(value, formatMicroseconds);
    case SpeedupAColumn:
    case SpeedupBColumn:
      return formatOptional(value, formatSpeedup);
    case SpeedupDeltaColumn:
      return formatDelta(value, speedupDeltaText);
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount)
    return {};
  switch (section) {
    case LayerColumn:
      return tr("Layer");
    case DensityAColumn:
      return tr("Density A");
    case DensityBColumn:
      return tr("Density B");
    case DensityDeltaColumn:
      return tr("Δ density");
    case TwellAColumn:
      return tr("TwELL A");
    case TwellBColumn:
      return tr("TwELL B");
    case TwellDeltaColumn:
      return tr("Δ TwELL");
    case SpeedupAColumn:
      return tr("Speedup A");
    case SpeedupBColumn:
      return tr("Speedup B");
    case SpeedupDeltaColumn:
      return tr("Δ speedup");
  }
  return {};
}

}  // namespace twellscope
