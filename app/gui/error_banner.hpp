// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QFrame>

#include "user_errors.hpp"

class QLabel;

namespace twellscope {

/// An inline strip above the views: what failed and what to do, until dismissed.
class ErrorBanner : public QFrame {
  Q_OBJECT

 public:
  explicit ErrorBanner(QWidget* parent = nullptr);
  QString text() const;

 public slots:
  void showError(const twellscope::UserError& error);
  void showNotice(const QString& text);
  void dismiss();

 private:
  QLabel* m_icon;
  QLabel* m_text;
};

}  // namespace twellscope
