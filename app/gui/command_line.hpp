// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QSize>
#include <QString>
#include <QStringList>
#include <optional>

namespace twellscope {

class MainWindow;

/// twellscope [FILE...] [--report R.json] [--compare B.json] [--checkpoint DIR] [--demo]
///            [--screenshot OUT.png [--view NAME] [--size WxH]]
struct CommandLine {
  QStringList paths;  ///< positional: reports or checkpoint directories
  QString report, compare, checkpoint, screenshot, view;
  QSize size{1400, 900};
  bool demo = false;
};

/// Parses the application's arguments; on a usage error returns nothing and sets `error`.
std::optional<CommandLine> parseCommandLine(const QStringList& arguments, QString* error);

/// Opens what the command line names in `window` (errors go to its banner).
void applyCommandLine(const CommandLine& options, MainWindow& window);

/// --screenshot: opens the report (and comparison), shows `view` at `size`, grabs the window into
/// `screenshot` and returns the process exit code (0, or twell::exit_code_for the failure), with
/// a message on stderr when it fails.
int renderScreenshot(const CommandLine& options);

}  // namespace twellscope
