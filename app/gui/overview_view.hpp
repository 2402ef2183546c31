// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

class QLabel;
class QListWidget;

namespace twellscope {

class ReportDocument;

/// The headline of a run: model, device, tracer, end-to-end throughput, density, warnings.
class OverviewView : public QWidget {
  Q_OBJECT

 public:
  OverviewView(ReportDocument* document, QWidget* parent = nullptr);
  /// The summary as plain text (tests, the PDF report).
  QString summaryText() const;
  QStringList warnings() const;

 private:
  void rebuild();

  ReportDocument* m_document;
  QLabel* m_summary;
  QListWidget* m_warnings;
};

/// Summary rows (label, value) of a report, shared by the overview and the PDF report.
QList<QPair<QString, QString>> summaryRows(const ReportDocument& document);

}  // namespace twellscope
