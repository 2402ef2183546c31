// SPDX-License-Identifier: GPL-3.0-or-later
#include "command_line.hpp"

#include <QApplication>
#include <QCommandLineParser>
#include <QPixmap>
#include <QRegularExpression>
#include <cstdio>

#include "main_window.hpp"
#include "report_document.hpp"
#include "twell/error.hpp"
#include "twell/report_io.hpp"

namespace twellscope {
namespace {

constexpr int kUsageExitCode = 2;

void printError(const QString& text) {
  std::fprintf(stderr, "twellscope: error: %s\n", qPrintable(text));
}

}  // namespace

std::optional<CommandLine> parseCommandLine(const QStringList& arguments, QString* error) {
  QCommandLineParser parser;
  parser.setApplicationDescription(QObject::tr("Activation-sparsity profiler for LLM feed-forward layers"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption report({QStringLiteral("r"), QStringLiteral("report")},
                                  QObject::tr("Open a report JSON."), QStringLiteral("file"));
  const QCommandLineOption compare(QStringLiteral("compare"), QObject::tr("Compare with a second report."),
                                   QStringLiteral("file"));
  const QCommandLineOption checkpoint(QStringLiteral("checkpoint"),
                                      QObject::tr("Put a checkpoint directory into the run panel."),
                                      QStringLiteral("dir"));
  const QCommandLineOption demo(QStringLiteral("demo"),
                                QObject::tr("Profile the built-in demo model at start."));
  const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                      QObject::tr("Render the window with --report to a PNG and exit."),
                                      QStringLiteral("png"));
  const QCommandLineOption view(
      QStringLiteral("view"),
      QObject::tr("View to show: %1.").arg(MainWindow::viewNames().join(QStringLiteral(", "))),
      QStringLiteral("name"));
  const QCommandLineOption size(QStringLiteral("size"),
                                QObject::tr("Window size for --screenshot (default 1400x900)."),
                                QStringLiteral("WxH"));
  parser.addOptions({report, compare, checkpoint, demo, screenshot, view, size});
  parser.addPositionalArgument(QStringLiteral("files"),
                               QObject::tr("Reports or checkpoint directories to open."),
                               QStringLiteral("[files...]"));
  if (!parser.parse(arguments)) {
    *error = parser.errorText();
    return std::nullopt;
  }
  if (parser.isSet(QStringLiteral("help"))) parser.showHelp(0);
  if (parser.isSet(QStringLiteral("version"))) parser.showVersion();
  CommandLine options;
  options.paths = parser.positionalArguments();
  options.report = parser.value(report);
  options.compare = parser.value(compare);
  options.checkpoint = parser.value(checkpoint);
  options.screenshot = parser.value(screenshot);
  options.view = parser.value(view);
  options.demo = parser.isSet(demo);
  if (parser.isSet(size)) {
    const QRegularExpressionMatch m =
        QRegularExpression(QStringLiteral("^(\\d+)x(\\d+)$")).match(parser.value(size));
    if (!m.hasMatch()) {
      *error = QObject::tr("--size wants WIDTHxHEIGHT, e.g. 1400x900, not \"%1\"").arg(parser.value(size));
      return std::nullopt;
    }
    options.size = QSize(m.captured(1).toInt(), m.captured(2).toInt());
  }
  if (!options.view.isEmpty() && !MainWindow::viewNames().contains(options.view.toLower())) {
    *error = QObject::tr("--view: unknown view \"%1\"; choose one of %2")
                 .arg(options.view, MainWindow::viewNames().join(QStringLiteral(", ")));
    return std::nullopt;
  }
  if (!options.screenshot.isEmpty() && options.report.isEmpty()) {
    *error = QObject::tr("--screenshot needs --report R.json (the report to render)");
    return std::nullopt;
  }
  return options;
}

void applyCommandLine(const CommandLine& options, MainWindow& window) {
  for (const QString& path : options.paths) window.openPath(path);
  if (!options.report.isEmpty()) window.openReport(options.report);
  if (!options.compare.isEmpty()) window.openComparison(options.compare);
  if (!options.checkpoint.isEmpty()) window.openCheckpoint(options.checkpoint);
  if (!options.view.isEmpty()) window.showView(options.view);
  if (options.demo) window.tryDemo();
}

int renderScreenshot(const CommandLine& options) {
  MainWindow window;
  auto load = [](const QString& path) {
    return std::make_shared<const twell::Report>(twell::load_report(path.toStdString()));
  };
  try {
    window.showReport(load(options.report), options.report);
    if (!options.compare.isEmpty()) window.document()->setComparison(load(options.compare), options.compare);
  } catch (const twell::Error& e) {
    printError(QString::fromUtf8(e.what()));
    return twell::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    printError(QString::fromUtf8(e.what()));
    return twell::exit_code_for(twell::Error::Kind::Internal);
  }
  if (!options.view.isEmpty()) window.showView(options.view);
  window.resize(options.size);
  window.show();
  // Layouts settle and queued replots run before the grab.
  for (int i = 0; i < 3; ++i) QApplication::processEvents();
  const QPixmap image = window.grab();
  if (image.isNull() || !image.save(options.screenshot)) {
    printError(
        QObject::tr("could not write the screenshot %1: check the folder exists and the name ends in .png")
            .arg(options.screenshot));
    return twell::exit_code_for(twell::Error::Kind::Io);
  }
  std::printf("%s\n", qPrintable(options.screenshot));
  return 0;
}

}  // namespace twellscope
