// SPDX-License-Identifier: GPL-3.0-or-later
#include "layer_table_model.hpp"

#include <limits>

#include "format.hpp"

namespace twellscope {
namespace {

// Missing values sort below every measured one.
constexpr double kMissingSortValue = -std::numeric_limits<double>::max();

double sortValue(const std::optional<double>& value) {
  return value ? *value : kMissingSortValue;
}

}  // namespace

LayerTableModel::LayerTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void LayerTableModel::setRows(std::vector<twell::views::LayerRow> rows) {
  beginResetModel();
  m_rows = std::move(rows);
  endResetModel();
}

int LayerTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_rows.size());
}

int LayerTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant LayerTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const twell::views::LayerRow& r = m_rows[std::size_t(index.row())];
  const std::optional<double> error = r.error ? std::optional<double>(r.error->rel_frobenius) : std::nullopt;
  if (role == PositionRole) return index.row();
  if (role == SortRole) {
    switch (index.column()) {
      case LayerColumn:
        return r.layer;
      case DensityColumn:
        return r.density;
      case NnzMeanColumn:
        return r.nnz_per_token.mean;
      case NnzP99Column:
        return r.nnz_per_token.p99;
      case NnzMaxColumn:
        return r.nnz_per_token.max;
      case DeadColumn:
        return r.dead_fraction;
      case TileColumn:
        return r.capacity ? double(r.tile_max) / r.capacity : double(r.tile_max);
      case DenseColumn:
        return sortValue(r.dense_us);
      case TwellColumn:
        return sortValue(r.twell_us);
      case SpeedupColumn:
        return sortValue(r.speedup);
      case ErrorColumn:
        return sortValue(error);
      case OverflowColumn:
        return double(r.overflow_rows);
      case DispatchColumn:
        return r.dispatch ? int(*r.dispatch) : -1;
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole)
    return index.column() == LayerColumn ? int(Qt::AlignLeft | Qt::AlignVCenter)
                                         : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && index.column() == TileColumn)
    return tr("Fullest (token, tile) holds %1 non-zeros; TwELL's capacity at this C is %2")
        .arg(r.tile_max)
        .arg(r.capacity);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case LayerColumn:
      return QStringLiteral("L%1").arg(r.layer);
    case DensityColumn:
      return formatPercent(r.density, 3);
    case NnzMeanColumn:
      return QString::number(r.nnz_per_token.mean, 'f', 1);
    case NnzP99Column:
      return QString::number(r.nnz_per_token.p99, 'f', 0);
    case NnzMaxColumn:
      return QString::number(r.nnz_per_token.max, 'f', 0);
    case DeadColumn:
      return formatPercent(r.dead_fraction, 1);
    case TileColumn:
      return QStringLiteral("%1 / %2").arg(r.tile_max).arg(r.capacity);
    case DenseColumn:
      return formatOptional(r.dense_us, formatMicroseconds);
    case TwellColumn:
      return formatOptional(r.twell_us, formatMicroseconds);
    case SpeedupColumn:
      return formatOptional(r.speedup, formatSpeedup);
    case ErrorColumn:
      return r.error ? QString::number(r.error->rel_frobenius, 'e', 2) : kNotMeasured;
    case OverflowColumn:
      return QString::number(r.overflow_rows);
    case DispatchColumn:
      if (!r.dispatch) return kNotMeasured;
      return *r.dispatch == twell::FfnPath::Twell ? tr("TwELL") : tr("dense");
  }
  return {};
}

QVariant LayerTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case DensityColumn:
        return tr("Fraction of (token, neuron) pairs whose gate fired");
      case DeadColumn:
        return tr("Neurons that never fired on this batch");
      case TileColumn:
        return tr("Most non-zeros in one (token, 256-wide tile) against TwELL's capacity");
      case SpeedupColumn:
        return tr("Dense median time over TwELL median time");
      case ErrorColumn:
        return tr("Relative Frobenius error of TwELL's output against dense");
      case OverflowColumn:
        return tr("Rows TwELL recomputed densely because a tile overflowed");
      case DispatchColumn:
        return tr(
            "The path a production forward runs: TwELL below the break-even density (the device's, or "
            "the one set for the run), "
            "dense from there on");
    }
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case LayerColumn:
      return tr("Layer");
    case DensityColumn:
      return tr("Density");
    case NnzMeanColumn:
      return tr("nnz/token mean");
    case NnzP99Column:
      return tr("p99");
    case NnzMaxColumn:
      return tr("max");
    case DeadColumn:
      return tr("Dead");
    case TileColumn:
      return tr("Tile max / cap");
    case DenseColumn:
      return tr("Dense");
    case TwellColumn:
      return tr("TwELL");
    case SpeedupColumn:
      return tr("Speedup");
    case ErrorColumn:
      return tr("Output error");
    case OverflowColumn:
      return tr("Overflow rows");
    case DispatchColumn:
      return tr("Dispatch");
  }
  return {};
}

LayerFilterProxy::LayerFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(LayerTableModel::SortRole);
}

void LayerFilterProxy::setText(const QString& text) {
  m_text = text.trimmed();
  invalidateFilter();
}

void LayerFilterProxy::setOnlyBelowBreakEven(bool on) {
  m_belowBreakEven = on;
  invalidateFilter();
}

void LayerFilterProxy::setOnlyOverflowing(bool on) {
  m_overflowing = on;
  invalidateFilter();
}

bool LayerFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const auto* model = qobject_cast<const LayerTableModel*>(sourceModel());
  if (!model || sourceParent.isValid()) return true;
  const twell::views::LayerRow& r = model->row(sourceRow);
  if (m_belowBreakEven && !(r.speedup && *r.speedup < 1.0)) return false;
  if (m_overflowing && r.overflow_rows == 0) return false;
  if (m_text.isEmpty()) return true;
  // "3" matches layer 3 exactly; "L1" matches L1, L10, L11...
  bool isNumber = false;
  const int wanted = m_text.toInt(&isNumber);
  if (isNumber) return r.layer == wanted;
  return QStringLiteral("L%1").arg(r.layer).startsWith(m_text, Qt::CaseInsensitive);
}

}  // namespace twellscope
