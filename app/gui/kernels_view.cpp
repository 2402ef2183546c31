// SPDX-License-Identifier: GPL-3.0-or-later
#include "kernels_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <set>

#include "format.hpp"
#include "kernel_table_model.hpp"
#include "plot_style.hpp"
#include "report_document.hpp"

namespace twellscope {
namespace {
constexpr double kTrackHeight = 0.8;
// Beyond this many records the timeline would be slow to draw as items; the table still has them all.
constexpr std::size_t kMaxTimelineSpans = 20000;
}  // namespace

TimelinePlot::TimelinePlot(ReportDocument* document, QWidget* parent)
    : PlotPage(tr("Timeline (aligned by layer)"), parent), m_document(document) {
  plot()->xAxis->setLabel(tr("µs from the start of each layer's slot (slots as wide as the slower path)"));
  plot()->yAxis->setRangeReversed(true);
  plot()->axisRect()->setRangeZoom(Qt::Horizontal);
  plot()->axisRect()->setRangeDrag(Qt::Horizontal);
  plot()->xAxis2->setVisible(true);
  plot()->xAxis2->setTickLabels(true);
  connect(plot()->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), plot()->xAxis2,
          qOverload<const QCPRange&>(&QCPAxis::setRange));
  m_selection = new QCPItemRect(plot());
  m_selection->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  m_selection->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  m_selection->setPen(QPen(selectionColor(), 1.5));
  m_selection->setBrush(QColor(0, 170, 255, 30));
  keepItem(m_selection);
  connect(document, &ReportDocument::reportChanged, this, &TimelinePlot::rebuild);
  connect(document, &ReportDocument::selectedLayerChanged, this, &TimelinePlot::showSelection);
  rebuild();
}

void TimelinePlot::rebuild() {
  clearTransientItems();
  m_layout = m_document->hasReport() ? twell::views::layer_aligned_timeline(m_document->report())
                                     : twell::views::TimelineLayout{};
  auto tracks = QSharedPointer<QCPAxisTickerText>::create();
  for (std::size_t i = 0; i < m_layout.tracks.size(); ++i)
    tracks->addTick(double(i), QString::fromStdString(m_layout.tracks[i]));
  plot()->yAxis->setTicker(tracks);
  auto slotTicker = QSharedPointer<QCPAxisTickerText>::create();
  for (const auto& slot : m_layout.layer_slots)
    slotTicker->addTick((slot.begin_us + slot.end_us) / 2, QStringLiteral("L%1").arg(slot.layer));
  plot()->xAxis2->setTicker(slotTicker);
  const bool drawn = m_layout.spans.size() <= kMaxTimelineSpans;
  if (drawn) {
    for (const auto& span : m_layout.spans) {
      auto* rect = new QCPItemRect(plot());
      rect->topLeft->setCoords(span.begin_us, span.track - kTrackHeight / 2);
      rect->bottomRight->setCoords(span.end_us, span.track + kTrackHeight / 2);
      const QColor color = pathColor(QString::fromStdString(m_layout.tracks[std::size_t(span.track)]));
      rect->setBrush(color);
      rect->setPen(QPen(color.darker(150), 0));
      rect->setSelectable(false);
    }
  }
  if (!m_document->hasReport())
    setEmptyMessage({});
  else if (m_layout.spans.empty())
    setEmptyMessage(tr("No per-layer records in this report's timeline"));
  else if (!drawn)
    setEmptyMessage(tr("%1 records: too many to draw; the table lists them all").arg(m_layout.spans.size()));
  else
    setEmptyMessage({});
  resetView();
  showSelection();
}

void TimelinePlot::resetView() {
  const double end = m_layout.layer_slots.empty() ? 1.0 : m_layout.layer_slots.back().end_us;
  plot()->xAxis->setRange(-end * 0.01, end * 1.01);
  plot()->yAxis->setRange(-0.6, std::max<double>(m_layout.tracks.size(), 1) - 0.4);
  plot()->replot();
}

void TimelinePlot::showSelection() {
  const int position = m_document->selectedLayer();
  m_selection->setVisible(false);
  if (position >= 0 && m_document->hasReport()) {
    const int layer = m_document->report().layers[std::size_t(position)].index;
    for (const auto& slot : m_layout.layer_slots)
      if (slot.layer == layer) {
        m_selection->topLeft->setCoords(slot.begin_us, 0);
        m_selection->bottomRight->setCoords(slot.end_us, 1);
        m_selection->setVisible(true);
      }
  }
  plot()->replot(QCustomPlot::rpQueuedReplot);
}

const twell::views::TimelineSpan* TimelinePlot::spanAt(double key, double value) const {
  const long track = std::lround(value);
  if (track < 0 || track >= long(m_layout.tracks.size()) || std::abs(value - track) > kTrackHeight / 2)
    return nullptr;
  return m_layout.find(int(track), key);
}

QString TimelinePlot::describe(double key, double value) const {
  const twell::views::TimelineSpan* span = spanAt(key, value);
  if (!span) return {};
  const twell::Report& report = m_document->report();
  const twell::KernelRecord& r = report.timeline[span->record];
  QString text = tr("L%1 %2 %3: %4, %5")
                     .arg(span->layer)
                     .arg(QString::fromStdString(r.tag.path), QString::fromStdString(r.tag.op),
                          QString::fromStdString(r.name), formatMicroseconds(r.duration_us()));
  if (const std::string variant = twell::views::kernel_variant_line(report, r); !variant.empty())
    text += QLatin1Char('\n') + QString::fromStdString(variant);
  return text;
}

void TimelinePlot::clicked(double key, double value) {
  const twell::views::TimelineSpan* span = spanAt(key, value);
  if (!span) return;
  const auto& layers = m_document->report().layers;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i].index == span->layer) m_document->selectLayer(int(i));
}

KernelsView::KernelsView(ReportDocument* document, QWidget* parent) : QWidget(parent), m_document(document) {
  m_model = new KernelTableModel(this);
  m_proxy = new KernelFilterProxy(this);
  m_proxy->setSourceModel(m_model);
  m_name = new QLineEdit(this);
  m_name->setPlaceholderText(tr("Filter by kernel name"));
  m_name->setClearButtonEnabled(true);
  m_layer = new QComboBox(this);
  m_path = new QComboBox(this);
  m_table = new QTableView(this);
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  m_table->verticalHeader()->setVisible(false);
  m_table->sortByColumn(KernelTableModel::StartColumn, Qt::AscendingOrder);
  m_timeline = new TimelinePlot(document, this);

  auto* filters = new QHBoxLayout;
  filters->addWidget(m_name, 2);
  filters->addWidget(new QLabel(tr("Layer"), this));
  filters->addWidget(m_layer);
  filters->addWidget(new QLabel(tr("Path"), this));
  filters->addWidget(m_path);
  auto* top = new QWidget(this);
  auto* topLayout = new QVBoxLayout(top);
  topLayout->setContentsMargins(0, 0, 0, 0);
  topLayout->addLayout(filters);
  topLayout->addWidget(m_table);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(top);
  splitter->addWidget(m_timeline);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter);

  connect(m_name, &QLineEdit::textChanged, this, &KernelsView::applyFilters);
  connect(m_layer, &QComboBox::currentIndexChanged, this, &KernelsView::applyFilters);
  connect(m_path, &QComboBox::currentIndexChanged, this, &KernelsView::applyFilters);
  connect(document, &ReportDocument::reportChanged, this, &KernelsView::rebuild);
  rebuild();
}

void KernelsView::rebuild() {
  m_model->setReport(m_document->reportPointer());
  const QSignalBlocker blockLayer(m_layer), blockPath(m_path);
  m_layer->clear();
  m_path->clear();
  m_layer->addItem(tr("any"), -2);
  m_path->addItem(tr("any"), QString());
  if (m_document->hasReport()) {
    std::set<int> layers;
    std::set<std::string> paths;
    for (const auto& r : m_document->report().timeline) {
      layers.insert(r.tag.layer);
      if (!r.tag.path.empty()) paths.insert(r.tag.path);
    }
    for (int layer : layers)
      m_layer->addItem(layer >= 0 ? QStringLiteral("L%1").arg(layer) : tr("none"), layer);
    for (const auto& path : paths)
      m_path->addItem(QString::fromStdString(path), QString::fromStdString(path));
  }
  applyFilters();
  m_table->resizeColumnsToContents();
  m_table->setColumnWidth(KernelTableModel::NameColumn,
                          std::min(m_table->columnWidth(KernelTableModel::NameColumn), 360));
}

void KernelsView::applyFilters() {
  m_proxy->setNameFilter(m_name->text());
  m_proxy->setLayerFilter(m_layer->currentData().isValid() ? m_layer->currentData().toInt() : -2);
  m_proxy->setPathFilter(m_path->currentData().toString());
}

}  // namespace twellscope
