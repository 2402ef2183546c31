// SPDX-License-Identifier: GPL-3.0-or-later
#include "kernel_table_model.hpp"

#include "format.hpp"
#include "twell/report_views.hpp"

namespace twellscope {
namespace {

QString dim3Text(const std::array<std::int32_t, 3>& d) {
  if (d[0] == 0 && d[1] == 0 && d[2] == 0) return kNotMeasured;
  return QStringLiteral("%1×%2×%3").arg(d[0]).arg(d[1]).arg(d[2]);
}

double dim3Size(const std::array<std::int32_t, 3>& d) {
  return double(d[0]) * d[1] * d[2];
}

// The full name, and what the kernel is when the report describes it.
QString nameToolTip(const twell::Report& report, const twell::KernelRecord& r) {
  const std::string variant = twell::views::kernel_variant_line(report, r);
  return QString::fromStdString(variant.empty() ? r.name : r.name + "\n\n" + variant);
}

}  // namespace

KernelTableModel::KernelTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void KernelTableModel::setReport(std::shared_ptr<const twell::Report> report) {
  beginResetModel();
  m_report = std::move(report);
  m_originNs = m_report ? twell::views::timeline_origin_ns(*m_report) : 0;
  endResetModel();
}

int KernelTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !m_report ? 0 : int(m_report->timeline.size());
}

int KernelTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant KernelTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const twell::KernelRecord& r = record(index.row());
  const double startUs = double(r.start_ns - m_originNs) / 1000.0;
  if (role == RecordRole) return index.row();
  if (role == SortRole) {
    switch (index.column()) {
      case LayerColumn:
        return r.tag.layer;
      case RepetitionColumn:
        return r.tag.repetition;
      case StartColumn:
        return startUs;
      case DurationColumn:
        return r.duration_us();
      case GridColumn:
        return dim3Size(r.grid);
      case BlockColumn:
        return dim3Size(r.block);
      case RegistersColumn:
        return r.registers_per_thread;
      case SharedColumn:
        return r.static_shared_bytes + r.dynamic_shared_bytes;
    }
    return data(index, Qt::DisplayRole);
  }
  if (role == Qt::ToolTipRole && index.column() == NameColumn) return nameToolTip(*m_report, r);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case NameColumn:
      return QString::fromStdString(r.name);
    case KindColumn:
      return QString::fromStdString(r.kind);
    case PhaseColumn:
      return QString::fromStdString(r.tag.phase) + (r.tag.warmup ? tr(" (warm-up)") : QString());
    case LayerColumn:
      return r.tag.layer >= 0 ? QStringLiteral("L%1").arg(r.tag.layer) : kNotMeasured;
    case PathColumn:
      return QString::fromStdString(r.tag.path);
    case OpColumn:
      return QString::fromStdString(r.tag.op);
    case RepetitionColumn:
      return r.tag.repetition;
    case StartColumn:
      return QString::number(startUs, 'f', 3);
    case DurationColumn:
      return QString::number(r.duration_us(), 'f', 3);
    case GridColumn:
      return dim3Text(r.grid);
    case BlockColumn:
      return dim3Text(r.block);
    // Launch resources exist only for kernel launches (CPU regions and copies have no grid).
    case RegistersColumn:
      return dim3Size(r.grid) > 0 ? QVariant(r.registers_per_thread) : QVariant(kNotMeasured);
    case SharedColumn:
      return dim3Size(r.grid) > 0 ? QVariant(r.static_shared_bytes + r.dynamic_shared_bytes)
                                  : QVariant(kNotMeasured);
  }
  return {};
}

QVariant KernelTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount)
    return {};
  switch (section) {
    case NameColumn:
      return tr("Name");
    case KindColumn:
      return tr("Kind");
    case PhaseColumn:
      return tr("Phase");
    case LayerColumn:
      return tr("Layer");
    case PathColumn:
      return tr("Path");
    case OpColumn:
      return tr("Op");
    case RepetitionColumn:
      return tr("Rep");
    case StartColumn:
      return tr("Start (µs)");
    case DurationColumn:
      return tr("Duration (µs)");
    case GridColumn:
      return tr("Grid");
    case BlockColumn:
      return tr("Block");
    case RegistersColumn:
      return tr("Registers");
    case SharedColumn:
      return tr("Shared (B)");
  }
  return {};
}

KernelFilterProxy::KernelFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(KernelTableModel::SortRole);
}

void KernelFilterProxy::setNameFilter(const QString& text) {
  m_name = text.trimmed();
  invalidateFilter();
}

void KernelFilterProxy::setLayerFilter(int layer) {
  m_layer = layer;
  invalidateFilter();
}

void KernelFilterProxy::setPathFilter(const QString& path) {
  m_path = path;
  invalidateFilter();
}

bool KernelFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const auto* model = qobject_cast<const KernelTableModel*>(sourceModel());
  if (!model || sourceParent.isValid()) return true;
  const twell::KernelRecord& r = model->record(sourceRow);
  if (m_layer != -2 && r.tag.layer != m_layer) return false;
  if (!m_path.isEmpty() && QString::fromStdString(r.tag.path) != m_path) return false;
  return m_name.isEmpty() || QString::fromStdString(r.name).contains(m_name, Qt::CaseInsensitive);
}

}  // namespace twellscope
