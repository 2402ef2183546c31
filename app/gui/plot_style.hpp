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

}  // namespace twellscope
