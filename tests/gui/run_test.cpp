// SPDX-License-Identifier: GPL-3.0-or-later
// A CPU-backend run of the generator's tiny preset from the run panel: progress, the report
// arriving whole, and cancel.
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <filesystem>

#include "error_banner.hpp"
#include "gui_fixture.hpp"
#include "overview_view.hpp"
#include "report_document.hpp"
#include "run_controller.hpp"
#include "run_panel.hpp"
#include "twell/model_generator.hpp"

namespace twellscope::test {
namespace {

/// The tiny model, generated once per build tree (ctest runs each test in its own process, and
/// generating costs seconds): keyed by generator revision and seed, renamed into place whole.
QString tinyModel() {
  namespace fs = std::filesystem;
  const fs::path cached = fs::path(TWELLSCOPE_BINARY_DIR) / "tests" / "gui" /
                          ("tiny-model-r" + std::to_string(twell::kGeneratorRevision) + "-seed1");
  if (!fs::exists(cached / "config.json")) {
    // Generated beside its final place, so the rename is atomic (same file system).
    const fs::path scratch = cached.string() + ".tmp-" + std::to_string(QCoreApplication::applicationPid());
    fs::remove_all(scratch);
    twell::GeneratorOptions options;
    options.preset = "tiny";
    options.seed = 1;
    twell::generate_model(options, scratch);
    std::error_code lostRace;  // another test process may have put it in place first
    fs::rename(scratch, cached, lostRace);
    fs::remove_all(scratch, lostRace);
  }
  return QString::fromStdString(cached.string());
}

void configureTinyRun(RunPanel* panel, int batch, int sequence, int repetitions) {
  panel->setModel(tinyModel());
  panel->setTokens(batch, sequence);
  panel->setRepetitions(1, repetitions);
  panel->setBackend(twell::runtime::BackendChoice::Cpu);
}

}  // namespace

TEST_F(GuiTest, RunsTheTinyModelOnTheCpuWithProgress) {
  RunPanel* panel = window->runPanel();
  configureTinyRun(panel, 1, 32, 2);
  QSignalSpy progress(window->runController(), &RunController::progressed);
  QSignalSpy finished(window->runController(), &RunController::finished);
  ASSERT_TRUE(panel->runButton()->isEnabled());
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  EXPECT_FALSE(panel->runButton()->isEnabled());
  EXPECT_TRUE(panel->cancelButton()->isEnabled());
  ASSERT_TRUE(finished.wait(60000)) << window->banner()->text().toStdString();
  EXPECT_GE(progress.count(), 3);
  double last = -1;
  for (const auto& call : progress) {
    EXPECT_GE(call.at(0).toDouble(), last);  // never goes backwards
    last = call.at(0).toDouble();
  }
  ASSERT_TRUE(window->document()->hasReport());
  const twell::Report& report = window->document()->report();
  EXPECT_EQ(report.device.backend, "cpu");
  EXPECT_EQ(report.layers.size(), 2u);
  EXPECT_EQ(report.config.sequence, 32u);
  EXPECT_FALSE(window->isShowingEmptyState());
  EXPECT_TRUE(panel->runButton()->isEnabled());
  EXPECT_EQ(panel->progressBar()->value(), panel->progressBar()->maximum());
}

TEST_F(GuiTest, ABreakEvenSetInThePanelRunsTheDispatchForward) {
  RunPanel* panel = window->runPanel();
  configureTinyRun(panel, 1, 32, 1);
  EXPECT_FALSE(panel->request().config.dispatch_break_even);  // the device's, by default
  panel->setDispatchBreakEven(0.5);
  ASSERT_TRUE(panel->request().config.dispatch_break_even);
  EXPECT_DOUBLE_EQ(*panel->request().config.dispatch_break_even, 0.5);
  QSignalSpy finished(window->runController(), &RunController::finished);
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  ASSERT_TRUE(finished.wait(60000)) << window->banner()->text().toStdString();
  const twell::Report& report = window->document()->report();
  ASSERT_TRUE(report.dispatch_break_even);
  EXPECT_DOUBLE_EQ(report.dispatch_break_even->density, 0.5);
  EXPECT_FALSE(report.dispatch_break_even->measured);
  // The CPU backend states no break-even of its own, so only a set one makes the third forward.
  ASSERT_EQ(report.end_to_end.size(), 3u);
  EXPECT_EQ(report.end_to_end[2].path, twell::kDispatchForwardPath);
  EXPECT_TRUE(window->overview()->summaryText().contains(QStringLiteral("per-layer dispatch")));
  panel->setDispatchBreakEven(std::nullopt);
  EXPECT_FALSE(panel->request().config.dispatch_break_even);
}

TEST_F(GuiTest, TwellKernelsOtherThanAutoAreRefusedByTheCpuBackendInTheBanner) {
  RunPanel* panel = window->runPanel();
  configureTinyRun(panel, 1, 32, 1);
  EXPECT_TRUE(panel->request().config.twell_kernels.is_auto());
  twell::TwellKernelRequest kernels;
  kernels.up_down = "balanced_cta";
  kernels.overflow = "sparse";
  panel->setTwellKernels(kernels);
  EXPECT_EQ(panel->request().config.twell_kernels, kernels);
  QSignalSpy failed(window->runController(), &RunController::failed);
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  ASSERT_TRUE(failed.wait(30000));
  EXPECT_TRUE(window->banner()->text().contains(QStringLiteral("one kernel per FFN stage")))
      << window->banner()->text().toStdString();
  EXPECT_TRUE(panel->runButton()->isEnabled());
  panel->setTwellKernels({});
  EXPECT_TRUE(panel->request().config.twell_kernels.is_auto());
}

TEST_F(GuiTest, CancelStopsARunAndKeepsNothing) {
  RunPanel* panel = window->runPanel();
  configureTinyRun(panel, 4, 256, 200);
  QSignalSpy cancelled(window->runController(), &RunController::cancelled);
  QSignalSpy progress(window->runController(), &RunController::progressed);
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  ASSERT_TRUE(progress.wait(30000));
  QTest::mouseClick(panel->cancelButton(), Qt::LeftButton);
  ASSERT_TRUE(cancelled.wait(60000));
  EXPECT_FALSE(window->document()->hasReport());
  EXPECT_TRUE(window->isShowingEmptyState());
  EXPECT_TRUE(panel->statusText().contains(QStringLiteral("Cancelled")));
  EXPECT_FALSE(window->runController()->isRunning());
}

TEST_F(GuiTest, ABadCheckpointFailsInTheBanner) {
  RunPanel* panel = window->runPanel();
  panel->setModel(QString::fromStdString((dir.path() / "no-such-model").string()));
  panel->setBackend(twell::runtime::BackendChoice::Cpu);
  QSignalSpy failed(window->runController(), &RunController::failed);
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  ASSERT_TRUE(failed.wait(30000));
  EXPECT_TRUE(window->banner()->text().contains(QStringLiteral("no-such-model")))
      << window->banner()->text().toStdString();
  EXPECT_TRUE(panel->runButton()->isEnabled());
}

TEST_F(GuiTest, CudaWithoutADeviceSaysToChooseTheCpu) {
  if (!twell::runtime::cuda_devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  RunPanel* panel = window->runPanel();
  panel->setModel(QString::fromStdString((dir.path() / "any-model").string()));
  panel->setBackend(twell::runtime::BackendChoice::Cuda);
  QSignalSpy failed(window->runController(), &RunController::failed);
  QTest::mouseClick(panel->runButton(), Qt::LeftButton);
  ASSERT_TRUE(failed.wait(30000));
  EXPECT_TRUE(window->banner()->text().contains(QStringLiteral("CPU backend")))
      << window->banner()->text().toStdString();
}

}  // namespace twellscope::test
