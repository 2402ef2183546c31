// SPDX-License-Identifier: GPL-3.0-or-later
#include "compare_view.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "compare_model.hpp"
#include "format.hpp"
#include "plot_style.hpp"
#include "report_document.hpp"
#include "twell/report_compare.hpp"

namespace twellscope {

CompareSpeedupPlot::CompareSpeedupPlot(ReportDocument* document, CompareModel* model, QWidget* parent)
    : PlotPage(tr("Speedup per layer, A vs B"), parent), m_document(document), m_model(model) {
  auto* group = new QCPBarsGroup(plot());
  m_a = new QCPBars(plot()->xAxis, plot()->yAxis);
  m_b = new QCPBars(plot()->xAxis, plot()->yAxis);
  m_a->setName(tr("A (on screen)"));
  m_b->setName(tr("B (comparison)"));
  m_a->setBrush(QColor(70, 110, 180));
  m_b->setBrush(QColor(150, 80, 160));
  for (QCPBars* bars : {m_a, m_b}) {
    bars->setWidth(0.38);
    bars->setPen(Qt::NoPen);
    bars->setBarsGroup(group);
  }
  plot()->legend->setVisible(true);
  placeLegendAbovePlot(plot());
  plot()->yAxis->setLabel(tr("speedup (dense / TwELL)"));
  plot()->axisRect()->setRangeZoom(Qt::Horizontal);
  plot()->axisRect()->setRangeDrag(Qt::Horizontal);
  connect(model, &QAbstractItemModel::modelReset, this, &CompareSpeedupPlot::rebuild);
  rebuild();
}

void CompareSpeedupPlot::rebuild() {
  QVector<double> ka, va, kb, vb;
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const auto& deltas = m_model->deltas();
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    ticker->addTick(double(i), QStringLiteral("L%1").arg(deltas[i].layer));
    if (deltas[i].speedup_a) ka << double(i), va << *deltas[i].speedup_a;
    if (deltas[i].speedup_b) kb << double(i), vb << *deltas[i].speedup_b;
  }
  m_a->setData(ka, va, true);
  m_b->setData(kb, vb, true);
  plot()->xAxis->setTicker(ticker);
  setEmptyMessage(m_document->hasComparison() && ka.isEmpty() && kb.isEmpty()
                      ? tr("Neither report has layer speedups")
                      : QString());
  resetView();
}

void CompareSpeedupPlot::resetView() {
  plot()->xAxis->setRange(-0.7, std::max<double>(m_model->deltas().size(), 1) - 0.3);
  double top = 1.2;
  for (const auto& d : m_model->deltas())
    top = std::max({top, d.speedup_a.value_or(0) * 1.15, d.speedup_b.value_or(0) * 1.15});
  plot()->yAxis->setRange(0, top);
  plot()->replot();
}

QString CompareSpeedupPlot::describe(double key, double) const {
  const long i = std::lround(key);
  if (i < 0 || i >= long(m_model->deltas().size())) return {};
  const auto& d = m_model->deltas()[std::size_t(i)];
  return tr("L%1: speedup A %2, B %3 (Δ %4); TwELL A %5, B %6")
      .arg(d.layer)
      .arg(formatOptional(d.speedup_a, formatSpeedup), formatOptional(d.speedup_b, formatSpeedup),
           formatDelta(d.speedup_delta(), [](double v) { return QString::number(v, 'f', 3); }),
           formatOptional(d.twell_us_a, formatMicroseconds),
           formatOptional(d.twell_us_b, formatMicroseconds));
}

CompareView::CompareView(ReportDocument* document, QWidget* parent) : QWidget(parent), m_document(document) {
  m_model = new CompareModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(CompareModel::SortRole);
  m_sources = new QLabel(this);
  m_sources->setWordWrap(true);
  m_sources->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* open = new QPushButton(tr("Open report to compare…"), this);
  connect(open, &QPushButton::clicked, this, &CompareView::openComparisonRequested);
  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(CompareModel::LayerColumn, Qt::AscendingOrder);
  m_table->verticalHeader()->setVisible(false);
  m_plot = new CompareSpeedupPlot(document, m_model, this);

  auto* header = new QHBoxLayout;
  header->addWidget(m_sources, 1);
  header->addWidget(open);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_table);
  splitter->addWidget(m_plot);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(header);
  layout->addWidget(m_summary);
  layout->addWidget(splitter, 1);
  connect(document, &ReportDocument::reportChanged, this, &CompareView::rebuild);
  connect(document, &ReportDocument::comparisonChanged, this, &CompareView::rebuild);
  rebuild();
}

void CompareView::rebuild() {
  if (!m_document->hasReport() || !m_document->hasComparison()) {
    m_model->setDeltas({});
    m_sources->setText(tr("Open a second report to see per-layer deltas against the one on screen (A)."));
    m_summary->clear();
    return;
  }
  const twell::ReportComparison comparison =
      twell::compare_reports(m_document->report(), m_document->comparison(), "A", "B");
  QStringList ratios;
  auto addRatio = [&](const QString& what, const std::optional<double>& ratio) {
    if (ratio) ratios << tr("%1 %2").arg(what, formatSpeedup(*ratio));
  };
  addRatio(tr("TwELL layer time"), comparison.twell_time_ratio);
  addRatio(tr("dense layer time"), comparison.dense_time_ratio);
  for (const auto& forward : comparison.end_to_end)
    addRatio(tr("end-to-end %1 tokens/ms").arg(QString::fromStdString(forward.path)), forward.ratio());
  QString summary = ratios.isEmpty()
                        ? tr("B / A: nothing timed in both")
                        : tr("B / A: %1 (layer times: geometric means over layers timed in both)")
                              .arg(ratios.join(QStringLiteral(", ")));
  for (const std::string& line : twell::kernel_change_lines(comparison))
    summary += QStringLiteral("\n") + QString::fromStdString(line);
  for (const std::string& caveat : comparison.caveats)
    summary += QStringLiteral("\n") + tr("Caveat: %1").arg(QString::fromStdString(caveat));
  m_summary->setText(summary);
  m_model->setDeltas(twell::views::layer_deltas(m_document->report(), m_document->comparison()));
  auto describeReport = [](const twell::Report& r, const QString& path) {
    return QStringLiteral("%1 — %2 on %3, C=%4")
        .arg(path.isEmpty() ? QObject::tr("(unsaved run)") : path, QString::fromStdString(r.model.source),
             QString::fromStdString(r.device.name))
        .arg(r.config.compression);
  };
  m_sources->setText(
      tr("<b>A</b>: %1<br><b>B</b>: %2")
          .arg(describeReport(m_document->report(), m_document->sourcePath()).toHtmlEscaped(),
               describeReport(m_document->comparison(), m_document->comparisonPath()).toHtmlEscaped()));
  m_table->resizeColumnsToContents();
}

QString CompareView::summaryText() const {
  return m_summary->text();
}

}  // namespace twellscope
