// SPDX-License-Identifier: GPL-3.0-or-later
// The twellscope binary's headless mode: --report R.json --screenshot OUT.png [--view NAME].
#include <QImage>

#include "command_line.hpp"
#include "gui_fixture.hpp"
#include "report_document.hpp"

namespace twellscope::test {

TEST(CommandLine, ParsesOptionsAndRejectsBadOnes) {
  QString error;
  const auto options =
      parseCommandLine({QStringLiteral("twellscope"), QStringLiteral("--report"), QStringLiteral("r.json"),
                        QStringLiteral("--screenshot"), QStringLiteral("o.png"), QStringLiteral("--view"),
                        QStringLiteral("heatmap"), QStringLiteral("--size"), QStringLiteral("800x600")},
                       &error);
  ASSERT_TRUE(options) << error.toStdString();
  EXPECT_EQ(options->report, QStringLiteral("r.json"));
  EXPECT_EQ(options->view, QStringLiteral("heatmap"));
  EXPECT_EQ(options->size, QSize(800, 600));
  EXPECT_FALSE(parseCommandLine(
      {QStringLiteral("twellscope"), QStringLiteral("--view"), QStringLiteral("nope")}, &error));
  EXPECT_TRUE(error.contains(QStringLiteral("heatmap")));
  EXPECT_FALSE(parseCommandLine(
      {QStringLiteral("twellscope"), QStringLiteral("--screenshot"), QStringLiteral("o.png")}, &error));
  EXPECT_FALSE(parseCommandLine(
      {QStringLiteral("twellscope"), QStringLiteral("--size"), QStringLiteral("big")}, &error));
}

TEST_F(GuiTest, CommandLineOpensFilesAndViews) {
  CommandLine options;
  options.paths = {reportPath};
  options.view = QStringLiteral("timing");
  applyCommandLine(options, *window);
  EXPECT_EQ(window->document()->sourcePath(), reportPath);
  EXPECT_EQ(window->currentViewName(), QStringLiteral("timing"));
}

TEST_F(GuiTest, ScreenshotRendersAViewAndExits) {
  const auto out = dir.path() / "shot.png";
  const auto result = twell::test::run_command(
      "QT_QPA_PLATFORM=offscreen " TWELLSCOPE_GUI_PATH " --report '" + reportPath.toStdString() +
      "' --screenshot '" + out.string() + "' --view heatmap --size 1000x700");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const QImage image(QString::fromStdString(out.string()));
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(1000, 700));

  const auto bad = twell::test::run_command("QT_QPA_PLATFORM=offscreen " TWELLSCOPE_GUI_PATH " --report '" +
                                            (dir.path() / "missing.json").string() + "' --screenshot '" +
                                            out.string() + "'");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("missing.json"), std::string::npos) << bad.output;
}

}  // namespace twellscope::test
