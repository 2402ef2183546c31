// SPDX-License-Identifier: GPL-3.0-or-later
// gtest_discover_tests runs this binary at build time without the tests' ENVIRONMENT, so the
// platform defaults to offscreen here; settings go to a test location, never the user's.
#include <gtest/gtest.h>

#include <QApplication>
#include <QStandardPaths>

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication::setAttribute(Qt::AA_Use96Dpi);
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("twellscope-tests"));
  QApplication::setApplicationName(QStringLiteral("twellscope-gui-tests"));
  QStandardPaths::setTestModeEnabled(true);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
