// SPDX-License-Identifier: GPL-3.0-or-later
#include "empty_state.hpp"

#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace twellscope {

EmptyState::EmptyState(QWidget* parent) : QWidget(parent) {
  auto* title = new QLabel(tr("<h2>Nothing open yet</h2>"), this);
  auto* text =
      new QLabel(tr("twellscope shows how sparse each FFN layer's activations are and what that sparsity "
                    "buys: the dense path against TwELL, kernel by kernel.<br>Start one of three ways:"),
                 this);
  text->setWordWrap(true);
  text->setMaximumWidth(560);
  auto* checkpoint = new QPushButton(tr("Open a checkpoint…"), this);
  checkpoint->setObjectName(QStringLiteral("openCheckpoint"));
  checkpoint->setToolTip(
      tr("A Hugging Face checkpoint directory (config.json + safetensors); then press Run"));
  auto* report = new QPushButton(tr("Open a report…"), this);
  report->setObjectName(QStringLiteral("openReport"));
  report->setToolTip(tr("A report JSON written by twellscope or twellscope-cli profile"));
  auto* demo = new QPushButton(tr("Try the demo"), this);
  demo->setObjectName(QStringLiteral("tryDemo"));
  demo->setToolTip(tr("Profile the built-in demo model (4 small sparse layers) on this machine"));
  for (QPushButton* b : {checkpoint, report, demo}) b->setMinimumSize(260, 40);
  auto* hint = new QLabel(tr("You can also drop a report or a checkpoint folder onto this window."), this);
  hint->setEnabled(false);
  auto* layout = new QVBoxLayout(this);
  layout->addStretch(2);
  for (QWidget* w : std::initializer_list<QWidget*>{title, text, checkpoint, report, demo, hint})
    layout->addWidget(w, 0, Qt::AlignHCenter);
  layout->addStretch(3);
  connect(checkpoint, &QPushButton::clicked, this, &EmptyState::openCheckpointRequested);
  connect(report, &QPushButton::clicked, this, &EmptyState::openReportRequested);
  connect(demo, &QPushButton::clicked, this, &EmptyState::demoRequested);
}

}  // namespace twellscope
