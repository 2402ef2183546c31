// SPDX-License-Identifier: GPL-3.0-or-later
// twellscope: the desktop app. Exit codes as twellscope-cli's (README): 0 success, 2 usage error,
// then twell::exit_code_for the failure of a --screenshot run.
#include <QApplication>
#include <cstdio>

#include "command_line.hpp"
#include "main_window.hpp"
#include "twell/version.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("twellscope"));
  QApplication::setApplicationName(QStringLiteral("twellscope"));
  QApplication::setApplicationVersion(QStringLiteral("%1 (%2)").arg(
      QString::fromLatin1(twell::version()), QString::fromLatin1(twell::git_commit())));
  QString error;
  const auto options = twellscope::parseCommandLine(QApplication::arguments(), &error);
  if (!options) {
    std::fprintf(stderr, "twellscope: %s (see --help)\n", qPrintable(error));
    return 2;
  }
  if (!options->screenshot.isEmpty()) return twellscope::renderScreenshot(*options);
  twellscope::MainWindow window;
  window.show();
  twellscope::applyCommandLine(*options, window);
  return QApplication::exec();
}
