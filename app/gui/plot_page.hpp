// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QSet>
#include <QWidget>

#include "qcp.hpp"

class QLabel;

namespace twellscope {

/// A plot with its toolbar (reset view, export) and a read-out line that shows the exact values
/// under the mouse. Subclasses fill the plot from the document and answer hover and click.
class PlotPage : public QWidget {
  Q_OBJECT

 public:
  PlotPage(const QString& title, QWidget* parent = nullptr);

  QString title() const { return m_title; }
  QCustomPlot* plot() const { return m_plot; }
  /// The current hover (or selection) read-out text.
  QString readoutText() const;
  /// PNG or PDF, by the suffix of `path`. Returns false and sets `error` on failure.
  bool exportTo(const QString& path, QString* error) const;

 public slots:
  /// Back to the view that shows all the data.
  virtual void resetView();

 protected:
  /// Called with plot coordinates when the mouse moves over the axis rect; returns the read-out,
  /// empty when nothing is under the mouse.
  virtual QString describe(double key, double value) const;
  /// Called on a left click (without drag) at plot coordinates.
  virtual void clicked(double key, double value);
  void setReadout(const QString& text);
  /// Shows a line in place of the plot when there is nothing to draw.
  void setEmptyMessage(const QString& text);
  /// Items that survive clearTransientItems (selection markers made once in a constructor).
  void keepItem(QCPAbstractItem* item) { m_persistent.insert(item); }
  /// Removes every item but the kept ones, before a rebuild adds its markers again.
  void clearTransientItems();

 private:
  void onMouseMove(QMouseEvent* event);
  void onMousePress(QMouseEvent* event);
  void onMouseRelease(QMouseEvent* event);
  void exportInteractively();

  QString m_title;
  QCustomPlot* m_plot;
  QLabel* m_readout;
  QCPItemText* m_emptyText;
  QPoint m_pressPosition;
  QSet<QCPAbstractItem*> m_persistent;
};

}  // namespace twellscope
