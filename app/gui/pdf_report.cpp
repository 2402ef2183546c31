// SPDX-License-Identifier: GPL-3.0-or-later
#include "pdf_report.hpp"

#include <QFileInfo>
#include <QPageLayout>
#include <QPageSize>
#include <QPdfWriter>

#include "layer_table_model.hpp"
#include "overview_view.hpp"
#include "plot_page.hpp"
#include "report_document.hpp"
#include "twell/report_views.hpp"

namespace twellscope {
namespace {

// Page coordinates in 1/96 inch: the resolution the plots were designed at.
constexpr int kResolution = 96;
constexpr int kMargin = 40;

class PageWriter {
 public:
  PageWriter(QPdfWriter* writer, QCPPainter* painter) : m_writer(writer), m_painter(painter) {}
  int width() const { return m_writer->width() - 2 * kMargin; }
  int bottom() const { return m_writer->height() - kMargin; }
  int y = kMargin;

  void newPage() {
    m_writer->newPage();
    y = kMargin;
  }
  void ensureRoom(int height) {
    if (y + height > bottom()) newPage();
  }
  void heading(const QString& text) {
    QFont font = m_painter->font();
    font.setPointSizeF(14);
    font.setBold(true);
    m_painter->setFont(font);
    ensureRoom(30);
    m_painter->drawText(QRect(kMargin, y, width(), 28), Qt::AlignLeft | Qt::AlignVCenter, text);
    y += 32;
    font.setPointSizeF(8);
    font.setBold(false);
    m_painter->setFont(font);
  }
  void line(const QString& label, const QString& value) {
    const QRect valueRect(kMargin + 170, y, width() - 170, 1000);
    const QRect bounds = m_painter->boundingRect(valueRect, Qt::TextWordWrap, value);
    ensureRoom(bounds.height() + 2);
    QFont bold = m_painter->font();
    bold.setBold(true);
    m_painter->save();
    m_painter->setFont(bold);
    m_painter->drawText(QRect(kMargin, y, 165, bounds.height()), Qt::AlignLeft | Qt::AlignTop, label);
    m_painter->restore();
    m_painter->drawText(QRect(kMargin + 170, y, width() - 170, bounds.height()), Qt::TextWordWrap, value);
    y += bounds.height() + 2;
  }
  void tableRow(const QStringList& cells, bool header) {
    ensureRoom(16);
    QFont font = m_painter->font();
    font.setBold(header);
    m_painter->setFont(font);
    const int cellWidth = width() / int(std::max<qsizetype>(cells.size(), 1));
    for (int i = 0; i < cells.size(); ++i)
      m_painter->drawText(QRect(kMargin + i * cellWidth, y, cellWidth - 4, 15),
                          Qt::AlignRight | Qt::AlignVCenter, cells[i]);
    font.setBold(false);
    m_painter->setFont(font);
    y += 16;
  }

 private:
  QPdfWriter* m_writer;
  QCPPainter* m_painter;
};

}  // namespace

bool writePdfReport(const QString& path, const ReportDocument& document, const QList<PlotPage*>& plots,
                    QString* error) {
  if (!document.hasReport()) {
    if (error) *error = QObject::tr("No report is open: open or run one first");
    return false;
  }
  QPdfWriter writer(path);
  writer.setResolution(kResolution);
  writer.setPageSize(QPageSize(QPageSize::A4));
  writer.setPageOrientation(QPageLayout::Landscape);
  writer.setPageMargins(QMarginsF(0, 0, 0, 0));
  writer.setCreator(QStringLiteral("twellscope"));
  writer.setTitle(
      QObject::tr("twellscope report: %1").arg(QString::fromStdString(document.report().model.source)));
  QCPPainter painter;
  if (!painter.begin(&writer)) {
    if (error)
      *error = QObject::tr("Could not write %1: check that the folder exists and is writable").arg(path);
    return false;
  }
  PageWriter page(&writer, &painter);
  page.heading(
      QObject::tr("twellscope report — %1").arg(QString::fromStdString(document.report().model.source)));
  for (const auto& [label, value] : summaryRows(document)) page.line(label, value);
  page.y += 8;
  page.heading(QObject::tr("Warnings"));
  if (document.overview().warnings.empty()) page.line(QString(), QObject::tr("None"));
  for (const auto& warning : document.overview().warnings)
    page.line(QStringLiteral("•"), QString::fromStdString(warning));

  page.newPage();
  page.heading(QObject::tr("Layers"));
  LayerTableModel table;
  table.setRows(document.layerRows());
  QStringList header;
  for (int c = 0; c < table.columnCount(); ++c) header << table.headerData(c, Qt::Horizontal).toString();
  page.tableRow(header, true);
  for (int r = 0; r < table.rowCount(); ++r) {
    QStringList cells;
    for (int c = 0; c < table.columnCount(); ++c) cells << table.data(table.index(r, c)).toString();
    page.tableRow(cells, false);
  }
  if (const auto variants = twell::views::kernel_variants_that_ran(document.report()); !variants.empty()) {
    page.y += 8;
    page.heading(QObject::tr("FFN kernels"));
    for (const twell::KernelVariant& v : variants)
      page.line(QString::fromStdString(v.name),
                QStringLiteral("%1 %2, %3: %4")
                    .arg(QString::fromStdString(v.path), QString::fromStdString(v.op),
                         QString::fromStdString(v.architectures), QString::fromStdString(v.description)));
  }

  for (PlotPage* plot : plots) {
    page.newPage();
    page.heading(plot->title());
    const int height = page.bottom() - page.y;
    painter.save();
    painter.translate(kMargin, page.y);
    plot->plot()->toPainter(&painter, page.width(), height);
    painter.restore();
  }
  painter.end();
  if (QFileInfo(path).size() == 0) {
    if (error) *error = QObject::tr("Writing %1 produced an empty file").arg(path);
    return false;
  }
  return true;
}

}  // namespace twellscope
