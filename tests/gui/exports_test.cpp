// SPDX-License-Identifier: GPL-3.0-or-later
// Every export the window offers writes a file that parses back.
#include <QFile>
#include <QImage>
#include <nlohmann/json.hpp>

#include "gui_fixture.hpp"
#include "report_document.hpp"
#include "timing_view.hpp"

namespace twellscope::test {
namespace {

QString pathIn(const twell::test::TempDir& dir, const char* name) {
  return QString::fromStdString((dir.path() / name).string());
}

}  // namespace

TEST_F(GuiTest, ExportsExistAndParse) {
  ASSERT_TRUE(window->openReport(reportPath));
  QString error;

  const QString json = pathIn(dir, "saved.json");
  ASSERT_TRUE(window->saveReport(json, &error)) << error.toStdString();
  EXPECT_EQ(twell::report_to_json_text(twell::load_report(json.toStdString())),
            twell::report_to_json_text(window->document()->report()));

  const QString csv = pathIn(dir, "layers.csv");
  ASSERT_TRUE(window->exportReport(csv, twell::ExportFormat::LayersCsv, &error)) << error.toStdString();
  const std::string csvText = twell::test::read_file(csv.toStdString());
  EXPECT_EQ(csvText.rfind("layer,density", 0), 0u) << csvText.substr(0, 80);
  EXPECT_EQ(std::count(csvText.begin(), csvText.end(), '\n'), kSampleLayers + 1);

  const QString kernels = pathIn(dir, "kernels.csv");
  ASSERT_TRUE(window->exportReport(kernels, twell::ExportFormat::KernelsCsv, &error)) << error.toStdString();
  EXPECT_FALSE(twell::test::read_file(kernels.toStdString()).empty());

  const QString trace = pathIn(dir, "trace.json");
  ASSERT_TRUE(window->exportReport(trace, twell::ExportFormat::ChromeTrace, &error)) << error.toStdString();
  const auto traceJson = nlohmann::json::parse(twell::test::read_file(trace.toStdString()));
  EXPECT_TRUE(traceJson.contains("traceEvents"));

  const QString png = pathIn(dir, "timing.png");
  ASSERT_TRUE(window->timing()->layers()->exportTo(png, &error)) << error.toStdString();
  const QImage image(png);
  EXPECT_FALSE(image.isNull());
  EXPECT_GE(image.width(), 1000);

  const QString plotPdf = pathIn(dir, "timing.pdf");
  ASSERT_TRUE(window->timing()->layers()->exportTo(plotPdf, &error)) << error.toStdString();
  EXPECT_EQ(twell::test::read_file(plotPdf.toStdString()).rfind("%PDF", 0), 0u);
  EXPECT_FALSE(window->timing()->layers()->exportTo(pathIn(dir, "timing.gif"), &error));
  EXPECT_TRUE(error.contains(QStringLiteral(".png")));

  const QString pdf = pathIn(dir, "report.pdf");
  ASSERT_TRUE(window->exportPdfReport(pdf, &error)) << error.toStdString();
  const std::string pdfBytes = twell::test::read_file(pdf.toStdString());
  EXPECT_EQ(pdfBytes.rfind("%PDF", 0), 0u);
  // Summary, layer table and one page per plot.
  const auto pages = [&] {
    std::size_t count = 0;
    for (std::size_t at = pdfBytes.find("/Type /Page\n"); at != std::string::npos;
         at = pdfBytes.find("/Type /Page\n", at + 1))
      ++count;
    for (std::size_t at = pdfBytes.find("/Type /Page\r"); at != std::string::npos;
         at = pdfBytes.find("/Type /Page\r", at + 1))
      ++count;
    return count;
  }();
  EXPECT_EQ(pages, std::size_t(2 + window->plotPages().size()));

  const QString plots = pathIn(dir, "plots");
  ASSERT_TRUE(window->exportAllPlots(plots, &error)) << error.toStdString();
  EXPECT_FALSE(QImage(plots + QStringLiteral("/heatmap.png")).isNull());
}

TEST_F(GuiTest, ExportFailuresSayWhy) {
  ASSERT_TRUE(window->openReport(reportPath));
  QString error;
  EXPECT_FALSE(
      window->exportReport(QStringLiteral("/nonexistent-dir/x.csv"), twell::ExportFormat::LayersCsv, &error));
  EXPECT_TRUE(error.contains(QStringLiteral("/nonexistent-dir/x.csv"))) << error.toStdString();
}

}  // namespace twellscope::test
