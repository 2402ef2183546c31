// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QColor>
#include <QString>

#include "qcp.hpp"

namespace twellscope {

/// One colour per path everywhere: dense blue, TwELL orange.
QColor pathColor(const QString& path);
QColor selectionColor();
/// A labelled vertical (or horizontal) marker line at `position` in plot coordinates.
QCPItemStraightLine* addMarker(QCustomPlot* plot, Qt::Orientation orientation, double position,
                               const QColor& color, const QString& label, double labelRatio = 0.05);
/// Moves the legend out of the axis rect into a row of its own above it, entries side by side:
/// inside, it hid the bars that reach the top of the value range.
void placeLegendAbovePlot(QCustomPlot* plot);

}  // namespace twellscope
