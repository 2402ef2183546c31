// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QList>
#include <QString>

namespace twellscope {

class PlotPage;
class ReportDocument;

/// A PDF with the summary and warnings, the layer table, then one plot per page (vector, via
/// QCustomPlot::toPainter). Returns false and sets `error` when the file cannot be written.
bool writePdfReport(const QString& path, const ReportDocument& document, const QList<PlotPage*>& plots,
                    QString* error);

}  // namespace twellscope
