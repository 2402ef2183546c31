// SPDX-License-Identifier: GPL-3.0-or-later
#include "error_banner.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>
#include <QToolButton>

namespace twellscope {

ErrorBanner::ErrorBanner(QWidget* parent) : QFrame(parent) {
  setObjectName(QStringLiteral("errorBanner"));
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  m_icon = new QLabel(this);
  m_text = new QLabel(this);
  m_text->setWordWrap(true);
  m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* close = new QToolButton(this);
  close->setText(tr("Dismiss"));
  connect(close, &QToolButton::clicked, this, &ErrorBanner::dismiss);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(m_icon);
  layout->addWidget(m_text, 1);
  layout->addWidget(close);
  hide();
}

QString ErrorBanner::text() const {
  return isHidden() ? QString() : m_text->text();
}

void ErrorBanner::showError(const UserError& error) {
  QPalette p = palette();
  p.setColor(QPalette::Window, QColor(253, 226, 226));
  p.setColor(QPalette::WindowText, QColor(110, 0, 0));
  setPalette(p);
  m_icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxCritical).pixmap(24, 24));
  m_text->setText(error.text());
  show();
}

void ErrorBanner::showNotice(const QString& text) {
  QPalette p = palette();
  p.setColor(QPalette::Window, QColor(255, 244, 214));
  p.setColor(QPalette::WindowText, QColor(90, 60, 0));
  setPalette(p);
  m_icon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxInformation).pixmap(24, 24));
  m_text->setText(text);
  show();
}

void ErrorBanner::dismiss() {
  hide();
}

}  // namespace twellscope
