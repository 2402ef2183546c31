// SPDX-License-Identifier: GPL-3.0-or-later
#include "main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>

#include "compare_view.hpp"
#include "distributions_view.hpp"
#include "empty_state.hpp"
#include "error_banner.hpp"
#include "heatmap_view.hpp"
#include "kernels_view.hpp"
#include "layer_table_view.hpp"
#include "overview_view.hpp"
#include "pdf_report.hpp"
#include "report_document.hpp"
#include "run_controller.hpp"
#include "run_panel.hpp"
#include "speedup_view.hpp"
#include "timing_view.hpp"
#include "token_map_view.hpp"
#include "twell/atomic_file.hpp"
#include "twell/report_io.hpp"
#include "twell/version.hpp"

namespace twellscope {
namespace {

constexpr int kMaxRecentFiles = 8;
const QString kRecentFilesKey = QStringLiteral("recentFiles");
// The demo's run: small enough for a CPU in seconds, big enough for meaningful statistics.
constexpr int kDemoBatch = 4, kDemoSequence = 256;

QString suffixFor(twell::ExportFormat format) {
  switch (format) {
    case twell::ExportFormat::LayersCsv:
      return QStringLiteral("layers.csv");
    case twell::ExportFormat::KernelsCsv:
      return QStringLiteral("kernels.csv");
    case twell::ExportFormat::ChromeTrace:
      return QStringLiteral("trace.json");
    case twell::ExportFormat::Markdown:
      return QStringLiteral("md");
  }
  return QStringLiteral("txt");
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("twellscope"));
  setAcceptDrops(true);
  m_document = new ReportDocument(this);
  m_runs = new RunController(this);

  m_banner = new ErrorBanner(this);
  m_empty = new EmptyState(this);
  m_tabs = new QTabWidget(this);
  m_tabs->setDocumentMode(true);
  m_overview = new OverviewView(m_document, m_tabs);
  m_layers = new LayerTableView(m_document, m_tabs);
  m_heatmap = new HeatmapView(m_document, m_tabs);
  m_tokenMap = new TokenMapView(m_document, m_tabs);
  m_distributions = new DistributionsView(m_document, m_tabs);
  m_timing = new TimingView(m_document, m_tabs);
  m_speedup = new SpeedupView(m_document, m_tabs);
  m_kernels = new KernelsView(m_document, m_tabs);
  m_compare = new CompareView(m_document, m_tabs);
  m_tabs->addTab(m_overview, tr("Overview"));
  m_tabs->addTab(m_layers, tr("Layers"));
  m_tabs->addTab(m_heatmap, tr("Heatmap"));
  m_tabs->addTab(m_tokenMap, tr("Tokens × neurons"));
  m_tabs->addTab(m_distributions, tr("Distributions"));
  m_tabs->addTab(m_timing, tr("Timing"));
  m_tabs->addTab(m_speedup, tr("Speedup vs density"));
  m_tabs->addTab(m_kernels, tr("Kernels"));
  m_tabs->addTab(m_compare, tr("Compare"));
  m_stack = new QStackedWidget(this);
  m_stack->addWidget(m_empty);
  m_stack->addWidget(m_tabs);

  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(m_banner);
  layout->addWidget(m_stack, 1);
  setCentralWidget(central);

  m_runPanel = new RunPanel(this);
  m_runDock = new QDockWidget(tr("Run"), this);
  m_runDock->setObjectName(QStringLiteral("runDock"));
  m_runDock->setWidget(m_runPanel);
  addDockWidget(Qt::LeftDockWidgetArea, m_runDock);

  connect(m_empty, &EmptyState::openReportRequested, this, &MainWindow::chooseReport);
  connect(m_empty, &EmptyState::openCheckpointRequested, this, &MainWindow::chooseCheckpoint);
  connect(m_empty, &EmptyState::demoRequested, this, &MainWindow::tryDemo);
  connect(m_compare, &CompareView::openComparisonRequested, this, &MainWindow::chooseComparison);
  connect(m_runPanel, &RunPanel::runRequested, m_runs, &RunController::start);
  connect(m_runPanel, &RunPanel::cancelRequested, m_runs, &RunController::cancel);
  connect(m_runs, &RunController::started, this, [this] {
    m_banner->dismiss();
    m_runPanel->setRunning(true);
    statusBar()->showMessage(tr("Running…"));
  });
  connect(m_runs, &RunController::progressed, m_runPanel, &RunPanel::setProgress);
  connect(m_runs, &RunController::finished, this, &MainWindow::onRunFinished);
  connect(m_runs, &RunController::failed, this, [this](const UserError& error) {
    m_runPanel->setRunning(false);
    m_runPanel->setStatus(tr("Failed"));
    showError(error);
  });
  connect(m_runs, &RunController::cancelled, this, [this] {
    m_runPanel->setRunning(false);
    m_runPanel->setProgress(0, tr("Cancelled: nothing was kept"));
    statusBar()->showMessage(tr("Run cancelled"), 5000);
  });
  connect(m_document, &ReportDocument::reportChanged, this, &MainWindow::onReportChanged);
  connect(m_document, &ReportDocument::selectedLayerChanged, this, [this](int position) {
    if (position >= 0)
      statusBar()->showMessage(tr("Selected layer %1").arg(m_document->layerLabel(position)));
  });

  buildMenus();
  onReportChanged();
  resize(1400, 900);
}

MainWindow::~MainWindow() = default;

bool MainWindow::isShowingEmptyState() const {
  return m_stack->currentWidget() == m_empty;
}

QList<PlotPage*> MainWindow::plotPages() const {
  return {m_heatmap,
          m_tokenMap,
          m_distributions->histogram(),
          m_distributions->occupancy(),
          m_timing->layers(),
          m_timing->breakdown(),
          m_speedup,
          m_kernels->timeline(),
          m_compare->plot()};
}

QStringList MainWindow::viewNames() {
  return {QStringLiteral("overview"), QStringLiteral("layers"),        QStringLiteral("heatmap"),
          QStringLiteral("tokens"),   QStringLiteral("distributions"), QStringLiteral("timing"),
          QStringLiteral("speedup"),  QStringLiteral("kernels"),       QStringLiteral("compare")};
}

bool MainWindow::showView(const QString& name) {
  const int index = int(viewNames().indexOf(name.toLower()));
  if (index < 0) return false;
  m_tabs->setCurrentIndex(index);
  return true;
}

QString MainWindow::currentViewName() const {
  return viewNames().value(m_tabs->currentIndex());
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &Checkpoint…"), this, &MainWindow::chooseCheckpoint);
  file->addAction(tr("&Open Report…"), QKeySequence::Open, this, &MainWindow::chooseReport);
  file->addAction(tr("Try the &Demo"), this, &MainWindow::tryDemo);
  m_recentMenu = file->addMenu(tr("Open &Recent"));
  rebuildRecentMenu();
  m_reportActions << file->addAction(tr("Co&mpare With…"), this, &MainWindow::chooseComparison);
  file->addSeparator();
  m_reportActions << file->addAction(tr("&Save Report As…"), QKeySequence::SaveAs, this,
                                     &MainWindow::saveInteractively);
  QMenu* exports = file->addMenu(tr("&Export"));
  m_reportActions << exports->menuAction();
  exports->addAction(tr("Layers CSV…"), this,
                     [this] { exportInteractively(twell::ExportFormat::LayersCsv); });
  exports->addAction(tr("Kernels CSV…"), this,
                     [this] { exportInteractively(twell::ExportFormat::KernelsCsv); });
  exports->addAction(tr("Chrome Trace (Perfetto)…"), this,
                     [this] { exportInteractively(twell::ExportFormat::ChromeTrace); });
  exports->addAction(tr("Markdown Summary…"), this,
                     [this] { exportInteractively(twell::ExportFormat::Markdown); });
  exports->addSeparator();
  exports->addAction(tr("PDF Report…"), this, &MainWindow::exportPdfInteractively);
  exports->addAction(tr("All Plots as PNG…"), this, &MainWindow::exportPlotsInteractively);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < m_tabs->count(); ++i) {
    QAction* action = view->addAction(m_tabs->tabText(i), this, [this, i] { m_tabs->setCurrentIndex(i); });
    action->setShortcut(QKeySequence(Qt::ALT | Qt::Key(Qt::Key_1 + i)));
  }
  view->addSeparator();
  view->addAction(tr("Reset All Plot Views"), this, [this] {
    for (PlotPage* page : plotPages()) page->resetView();
  });
  view->addAction(m_runDock->toggleViewAction());

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About twellscope"), this, [this] {
    QMessageBox::about(
        this, tr("About twellscope"),
        tr("<b>twellscope %1</b> (%2)<br>Activation-sparsity profiler for LLM feed-forward layers: "
           "dense vs TwELL (arXiv 2603.23198).<br>GPL-3.0-or-later; plots by QCustomPlot.")
            .arg(QString::fromLatin1(twell::version()), QString::fromLatin1(twell::git_commit())));
  });
}

QStringList MainWindow::recentFiles() const {
  return QSettings().value(kRecentFilesKey).toStringList();
}

void MainWindow::addRecentFile(const QString& path) {
  QStringList files = recentFiles();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > kMaxRecentFiles) files.removeLast();
  QSettings().setValue(kRecentFilesKey, files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  m_recentMenu->clear();
  const QStringList files = recentFiles();
  for (const QString& path : files) m_recentMenu->addAction(path, this, [this, path] { openPath(path); });
  if (files.isEmpty()) m_recentMenu->addAction(tr("(none yet)"))->setEnabled(false);
  m_recentMenu->addSeparator();
  m_recentMenu->addAction(tr("Clear List"), this, [this] {
    QSettings().remove(kRecentFilesKey);
    rebuildRecentMenu();
  });
}

void MainWindow::showError(const UserError& error) {
  m_banner->showError(error);
  statusBar()->showMessage(error.what, 10000);
}

bool MainWindow::openReport(const QString& path) {
  try {
    auto report = std::make_shared<const twell::Report>(twell::load_report(path.toStdString()));
    m_banner->dismiss();
    m_document->setReport(std::move(report), path);
    addRecentFile(path);
    return true;
  } catch (const twell::Error& e) {
    showError(describeError(tr("Opening report %1").arg(path), e));
  } catch (const std::exception& e) {
    showError(describeError(tr("Opening report %1").arg(path), e));
  }
  return false;
}

bool MainWindow::openComparison(const QString& path) {
  if (!m_document->hasReport()) {
    showError({tr("Nothing to compare with"),
               tr("Open or run a report first (A), then a second one to compare (B).")});
    return false;
  }
  try {
    auto report = std::make_shared<const twell::Report>(twell::load_report(path.toStdString()));
    m_banner->dismiss();
    m_document->setComparison(std::move(report), path);
    showView(QStringLiteral("compare"));
    return true;
  } catch (const twell::Error& e) {
    showError(describeError(tr("Opening report %1 to compare").arg(path), e));
  } catch (const std::exception& e) {
    showError(describeError(tr("Opening report %1 to compare").arg(path), e));
  }
  return false;
}

void MainWindow::openCheckpoint(const QString& directory) {
  m_runPanel->setModel(directory);
  m_runDock->show();
  m_runDock->raise();
  if (directory != kDemoModel) addRecentFile(directory);
  statusBar()->showMessage(tr("Checkpoint %1: set the run options and press Run").arg(directory));
}

void MainWindow::openPath(const QString& path) {
  if (QFileInfo(path).isDir())
    openCheckpoint(path);
  else
    openReport(path);
}

void MainWindow::showReport(std::shared_ptr<const twell::Report> report, const QString& sourcePath) {
  m_document->setReport(std::move(report), sourcePath);
}

void MainWindow::tryDemo() {
  if (m_runs->isRunning()) return;
  openCheckpoint(kDemoModel);
  m_runPanel->setTokens(kDemoBatch, kDemoSequence);
  m_runs->start(m_runPanel->request());
}

void MainWindow::onRunFinished(std::shared_ptr<const twell::Report> report) {
  m_runPanel->setRunning(false);
  m_runPanel->setProgress(1, tr("Done: %1 layers profiled").arg(report->layers.size()));
  showReport(std::move(report), QString());
  statusBar()->showMessage(tr("Run finished; File ▸ Save Report As… keeps it"), 10000);
}

void MainWindow::onReportChanged() {
  const bool has = m_document->hasReport();
  m_stack->setCurrentWidget(has ? static_cast<QWidget*>(m_tabs) : m_empty);
  for (QAction* action : m_reportActions) action->setEnabled(has);
  if (!has) {
    setWindowTitle(QStringLiteral("twellscope"));
    return;
  }
  // Ready to re-run what the report profiled, when that model is here.
  const QString model = QString::fromStdString(m_document->report().model.source);
  if (m_runPanel->model().isEmpty() && (model == kDemoModel || QFileInfo(model).isDir()))
    m_runPanel->setModel(model);
  const QString source =
      m_document->sourcePath().isEmpty() ? tr("unsaved run") : QFileInfo(m_document->sourcePath()).fileName();
  setWindowTitle(QStringLiteral("%1 — %2 — twellscope")
                     .arg(source, QString::fromStdString(m_document->report().model.source)));
}

void MainWindow::chooseReport() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open report"), QString(),
                                                    tr("twellscope report (*.json);;All files (*)"));
  if (!path.isEmpty()) openReport(path);
}

void MainWindow::chooseCheckpoint() {
  const QString directory = QFileDialog::getExistingDirectory(this, tr("Open checkpoint directory"));
  if (!directory.isEmpty()) openCheckpoint(directory);
}

void MainWindow::chooseComparison() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Report to compare"), QString(),
                                                    tr("twellscope report (*.json);;All files (*)"));
  if (!path.isEmpty()) openComparison(path);
}

bool MainWindow::writeText(const QString& path, const std::string& text, QString* error) {
  try {
    twell::write_file_atomically(path.toStdString(), text);
    return true;
  } catch (const twell::Error& e) {
    if (error) *error = describeError(tr("Writing %1").arg(path), e).text();
  } catch (const std::exception& e) {
    if (error) *error = describeError(tr("Writing %1").arg(path), e).text();
  }
  return false;
}

bool MainWindow::saveReport(const QString& path, QString* error) {
  if (!m_document->hasReport()) {
    if (error) *error = tr("No report is open");
    return false;
  }
  try {
    twell::save_report(m_document->report(), path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = describeError(tr("Saving report %1").arg(path), e).text();
    return false;
  }
  m_document->setSourcePath(path);
  addRecentFile(path);
  onReportChanged();
  return true;
}

bool MainWindow::exportReport(const QString& path, twell::ExportFormat format, QString* error) {
  if (!m_document->hasReport()) {
    if (error) *error = tr("No report is open");
    return false;
  }
  std::string text;
  try {
    text = twell::export_report(m_document->report(), format);
  } catch (const std::exception& e) {
    if (error) *error = describeError(tr("Exporting"), e).text();
    return false;
  }
  return writeText(path, text, error);
}

bool MainWindow::exportPdfReport(const QString& path, QString* error) {
  return writePdfReport(path, *m_document, plotPages(), error);
}

bool MainWindow::exportAllPlots(const QString& folder, QString* error) {
  if (!QDir().mkpath(folder)) {
    if (error) *error = tr("Cannot create folder %1").arg(folder);
    return false;
  }
  const QStringList names = {QStringLiteral("heatmap"),
                             QStringLiteral("token-map"),
                             QStringLiteral("nnz-histogram"),
                             QStringLiteral("tile-occupancy"),
                             QStringLiteral("layer-timing"),
                             QStringLiteral("kernel-breakdown"),
                             QStringLiteral("speedup-vs-density"),
                             QStringLiteral("timeline"),
                             QStringLiteral("compare")};
  const QList<PlotPage*> pages = plotPages();
  for (int i = 0; i < pages.size(); ++i)
    if (!pages[i]->exportTo(QDir(folder).filePath(names[i] + QStringLiteral(".png")), error)) return false;
  return true;
}

void MainWindow::saveInteractively() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save report"), QStringLiteral("report.json"),
                                                    tr("twellscope report (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  if (!saveReport(path, &error)) showError({error, QString()});
}

void MainWindow::exportInteractively(twell::ExportFormat format) {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Export"), QStringLiteral("report.") + suffixFor(format));
  if (path.isEmpty()) return;
  QString error;
  if (!exportReport(path, format, &error))
    showError({error, QString()});
  else
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
}

void MainWindow::exportPdfInteractively() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("PDF report"), QStringLiteral("report.pdf"), tr("PDF (*.pdf)"));
  if (path.isEmpty()) return;
  QString error;
  if (!exportPdfReport(path, &error))
    showError({error, QString()});
  else
    statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
}

void MainWindow::exportPlotsInteractively() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Folder for the plots"));
  if (folder.isEmpty()) return;
  QString error;
  if (!exportAllPlots(folder, &error))
    showError({error, QString()});
  else
    statusBar()->showMessage(tr("Wrote the plots to %1").arg(folder), 5000);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QList<QUrl> urls = event->mimeData()->urls();
  if (urls.isEmpty() || !urls.first().isLocalFile()) return;
  openPath(urls.first().toLocalFile());
  // A second dropped report becomes the comparison.
  if (urls.size() > 1 && urls[1].isLocalFile() && m_document->hasReport())
    openComparison(urls[1].toLocalFile());
  event->acceptProposedAction();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  // A running session is asked to stop; the controller's destructor waits for it.
  m_runs->cancel();
  event->accept();
}

}  // namespace twellscope
