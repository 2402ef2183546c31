// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>

namespace twellscope {

/// What the window shows before anything is open: the three ways in.
class EmptyState : public QWidget {
  Q_OBJECT

 public:
  explicit EmptyState(QWidget* parent = nullptr);

 signals:
  void openCheckpointRequested();
  void openReportRequested();
  void demoRequested();
};

}  // namespace twellscope
