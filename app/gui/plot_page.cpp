// SPDX-License-Identifier: GPL-3.0-or-later
#include "plot_page.hpp"

#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

namespace twellscope {

PlotPage::PlotPage(const QString& title, QWidget* parent) : QWidget(parent), m_title(title) {
  setObjectName(title);
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName(QStringLiteral("plot"));
  m_plot->setMouseTracking(true);
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->setNoAntialiasingOnDrag(true);
  m_plot->setMinimumSize(320, 220);
  m_emptyText = new QCPItemText(m_plot);
  m_emptyText->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_emptyText->position->setCoords(0.5, 0.5);
  m_emptyText->setVisible(false);
  keepItem(m_emptyText);

  m_readout = new QLabel(this);
  m_readout->setObjectName(QStringLiteral("readout"));
  m_readout->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_readout->setMinimumHeight(m_readout->fontMetrics().height() + 4);

  auto* reset = new QToolButton(this);
  reset->setText(tr("Reset view"));
  reset->setToolTip(tr("Show all the data again (scroll to zoom, drag to pan)"));
  connect(reset, &QToolButton::clicked, this, &PlotPage::resetView);
  auto* exportButton = new QToolButton(this);
  exportButton->setText(tr("Export…"));
  exportButton->setToolTip(tr("Save this plot as PNG or PDF"));
  connect(exportButton, &QToolButton::clicked, this, &PlotPage::exportInteractively);

  auto* header = new QHBoxLayout;
  auto* titleLabel = new QLabel(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()), this);
  header->addWidget(titleLabel);
  header->addStretch();
  header->addWidget(reset);
  header->addWidget(exportButton);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(header);
  layout->addWidget(m_plot, 1);
  layout->addWidget(m_readout);

  connect(m_plot, &QCustomPlot::mouseMove, this, &PlotPage::onMouseMove);
  connect(m_plot, &QCustomPlot::mousePress, this, &PlotPage::onMousePress);
  connect(m_plot, &QCustomPlot::mouseRelease, this, &PlotPage::onMouseRelease);
}

QString PlotPage::readoutText() const {
  return m_readout->text();
}

void PlotPage::resetView() {
  m_plot->rescaleAxes();
  m_plot->replot();
}

QString PlotPage::describe(double, double) const {
  return {};
}

void PlotPage::clicked(double, double) {}

void PlotPage::setReadout(const QString& text) {
  m_readout->setText(text);
}

void PlotPage::setEmptyMessage(const QString& text) {
  m_emptyText->setText(text);
  m_emptyText->setVisible(!text.isEmpty());
}

void PlotPage::clearTransientItems() {
  for (int i = m_plot->itemCount() - 1; i >= 0; --i)
    if (!m_persistent.contains(m_plot->item(i))) m_plot->removeItem(i);
}

void PlotPage::onMouseMove(QMouseEvent* event) {
  if (event->buttons() != Qt::NoButton) return;  // dragging pans; no read-out churn
  const QPointF pos = event->position();
  if (!m_plot->axisRect()->rect().contains(pos.toPoint())) return;
  const QString text = describe(m_plot->xAxis->pixelToCoord(pos.x()), m_plot->yAxis->pixelToCoord(pos.y()));
  setReadout(text);
  if (!text.isEmpty() && m_plot->isVisible())
    QToolTip::showText(event->globalPosition().toPoint(), text, m_plot);
}

void PlotPage::onMousePress(QMouseEvent* event) {
  m_pressPosition = event->position().toPoint();
}

void PlotPage::onMouseRelease(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (event->button() != Qt::LeftButton || (pos - m_pressPosition).manhattanLength() > 3) return;
  if (!m_plot->axisRect()->rect().contains(pos)) return;
  clicked(m_plot->xAxis->pixelToCoord(pos.x()), m_plot->yAxis->pixelToCoord(pos.y()));
}

bool PlotPage::exportTo(const QString& path, QString* error) const {
  const QString suffix = QFileInfo(path).suffix().toLower();
  const int width = std::max(m_plot->width(), 1000), height = std::max(m_plot->height(), 600);
  bool ok = false;
  if (suffix == QLatin1String("pdf"))
    ok = m_plot->savePdf(path, width, height, QCP::epAllowCosmetic, QStringLiteral("twellscope"), m_title);
  else if (suffix == QLatin1String("png"))
    ok = m_plot->savePng(path, width, height);
  else {
    if (error) *error = tr("Unknown image type \"%1\": save as .png or .pdf").arg(suffix);
    return false;
  }
  if (!ok && error) *error = tr("Could not write %1: check that the folder exists and is writable").arg(path);
  return ok;
}

void PlotPage::exportInteractively() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export %1").arg(m_title), m_title + QStringLiteral(".png"),
                                   tr("PNG image (*.png);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  QString error;
  if (!exportTo(path, &error)) QMessageBox::warning(this, tr("Export failed"), error);
}

}  // namespace twellscope
