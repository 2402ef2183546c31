// SPDX-License-Identifier: GPL-3.0-or-later
#include "plot_style.hpp"

namespace twellscope {

QColor pathColor(const QString& path) {
  if (path == QLatin1String("dense")) return QColor(70, 110, 180);
  if (path == QLatin1String("twell")) return QColor(235, 130, 30);
  return QColor(120, 120, 120);
}

QColor selectionColor() {
  return QColor(0, 170, 255);
}

QCPItemStraightLine* addMarker(QCustomPlot* plot, Qt::Orientation orientation, double position,
                               const QColor& color, const QString& label, double labelRatio) {
  auto* line = new QCPItemStraightLine(plot);
  line->setPen(QPen(color, 1.5, Qt::DashLine));
  auto* text = new QCPItemText(plot);
  text->setColor(color);
  text->setText(label);
  if (orientation == Qt::Vertical) {
    line->point1->setCoords(position, 0);
    line->point2->setCoords(position, 1);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(position, labelRatio);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    text->setPadding(QMargins(3, 0, 0, 0));
  } else {
    line->point1->setCoords(0, position);
    line->point2->setCoords(1, position);
    text->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(labelRatio, position);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
  }
  text->setClipToAxisRect(true);
  return line;
}

void placeLegendAbovePlot(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  if (plot->axisRect()->insetLayout()->take(legend)) plot->axisRect()->insetLayout()->simplify();
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->setRowStretchFactor(0, 0.001);  // as tall as its entries, no more
  // The legend at the left, as wide as its entries: an empty element takes the rest of the row.
  auto* row = new QCPLayoutGrid;
  plot->plotLayout()->addElement(0, 0, row);
  row->addElement(0, 0, legend);
  row->addElement(0, 1, new QCPLayoutElement(plot));
  row->setColumnStretchFactor(0, 0.001);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setBorderPen(Qt::NoPen);
  legend->setBrush(Qt::NoBrush);
  legend->setMargins(QMargins(4, 0, 4, 0));
}

}  // namespace twellscope
