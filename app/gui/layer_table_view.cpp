// SPDX-License-Identifier: GPL-3.0-or-later
#include "layer_table_view.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QTableView>
#include <QVBoxLayout>

#include "layer_table_model.hpp"
#include "report_document.hpp"

namespace twellscope {

LayerTableView::LayerTableView(ReportDocument* document, QWidget* parent)
    : QWidget(parent), m_document(document) {
  m_model = new LayerTableModel(this);
  m_proxy = new LayerFilterProxy(this);
  m_proxy->setSourceModel(m_model);
  m_filter = new QLineEdit(this);
  m_filter->setPlaceholderText(tr("Filter layers: 3, L1…"));
  m_filter->setClearButtonEnabled(true);
  m_belowBreakEven = new QCheckBox(tr("Only slower than dense"), this);
  m_overflowing = new QCheckBox(tr("Only overflowing tiles"), this);
  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(LayerTableModel::LayerColumn, Qt::AscendingOrder);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->setVisible(false);
  m_table->horizontalHeader()->setStretchLastSection(true);

  auto* filters = new QHBoxLayout;
  filters->addWidget(m_filter, 1);
  filters->addWidget(m_belowBreakEven);
  filters->addWidget(m_overflowing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(filters);
  layout->addWidget(m_table);

  connect(m_filter, &QLineEdit::textChanged, m_proxy, &LayerFilterProxy::setText);
  connect(m_belowBreakEven, &QCheckBox::toggled, m_proxy, &LayerFilterProxy::setOnlyBelowBreakEven);
  connect(m_overflowing, &QCheckBox::toggled, m_proxy, &LayerFilterProxy::setOnlyOverflowing);
  connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &LayerTableView::onCurrentChanged);
  connect(document, &ReportDocument::reportChanged, this, &LayerTableView::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &LayerTableView::showSelection);
  rebuild();
}

void LayerTableView::rebuild() {
  m_model->setRows(m_document->layerRows());
  m_table->resizeColumnsToContents();
  showSelection(m_document->selectedLayer());
}

void LayerTableView::showSelection(int position) {
  if (position < 0 || position >= m_model->rowCount()) return;
  const QModelIndex index = m_proxy->mapFromSource(m_model->index(position, 0));
  if (!index.isValid() || m_table->currentIndex().row() == index.row()) return;
  m_table->selectionModel()->setCurrentIndex(index,
                                             QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  m_table->scrollTo(index);
}

void LayerTableView::onCurrentChanged() {
  const QModelIndex current = m_table->currentIndex();
  if (!current.isValid()) return;
  m_document->selectLayer(m_proxy->mapToSource(current).row());
}

}  // namespace twellscope
