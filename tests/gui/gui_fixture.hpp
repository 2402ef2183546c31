// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <gtest/gtest.h>

#include <QApplication>
#include <QMouseEvent>
#include <QSettings>
#include <QTest>
#include <QWheelEvent>
#include <memory>

#include "main_window.hpp"
#include "plot_page.hpp"
#include "sample_report.hpp"
#include "test_support.hpp"
#include "twell/report_io.hpp"

namespace twellscope::test {

/// A shown main window and the sample report saved to a temporary file.
class GuiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QSettings().clear();
    reportPath = QString::fromStdString((dir.path() / "sample.json").string());
    twell::save_report(makeSampleReport(), reportPath.toStdString());
    window = std::make_unique<MainWindow>();
    window->resize(1400, 900);
    window->show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  }
  void TearDown() override { window.reset(); }

  /// Shows `name` and lets layouts settle so plots have their final size.
  void show(const QString& name) {
    ASSERT_TRUE(window->showView(name));
    QApplication::processEvents();
  }

  twell::test::TempDir dir{"twellscope-gui-test"};
  QString reportPath;
  std::unique_ptr<MainWindow> window;
};

/// Pixel position of plot coordinates in the plot widget.
inline QPoint pixelOf(QCustomPlot* plot, double key, double value) {
  return QPoint(int(plot->xAxis->coordToPixel(key)), int(plot->yAxis->coordToPixel(value)));
}

inline void hover(QCustomPlot* plot, QPoint at) {
  QMouseEvent move(QEvent::MouseMove, at, plot->mapToGlobal(at), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
  QApplication::sendEvent(plot, &move);
}

inline void click(QCustomPlot* plot, QPoint at) {
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, at);
}

inline void wheel(QCustomPlot* plot, QPoint at, int steps) {
  QWheelEvent event(at, plot->mapToGlobal(at), QPoint(), QPoint(0, 120 * steps), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
  QApplication::sendEvent(plot, &event);
}

inline void drag(QCustomPlot* plot, QPoint from, QPoint to) {
  QMouseEvent press(QEvent::MouseButtonPress, from, plot->mapToGlobal(from), Qt::LeftButton, Qt::LeftButton,
                    Qt::NoModifier);
  QApplication::sendEvent(plot, &press);
  QMouseEvent move(QEvent::MouseMove, to, plot->mapToGlobal(to), Qt::NoButton, Qt::LeftButton,
                   Qt::NoModifier);
  QApplication::sendEvent(plot, &move);
  QMouseEvent release(QEvent::MouseButtonRelease, to, plot->mapToGlobal(to), Qt::LeftButton, Qt::NoButton,
                      Qt::NoModifier);
  QApplication::sendEvent(plot, &release);
}

}  // namespace twellscope::test
