// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QMainWindow>
#include <memory>

#include "twell/report.hpp"
#include "twell/report_export.hpp"

class QDockWidget;
class QMenu;
class QStackedWidget;
class QTabWidget;

namespace twellscope {

class CompareView;
class DistributionsView;
class EmptyState;
class ErrorBanner;
class HeatmapView;
class KernelsView;
class LayerTableView;
class OverviewView;
class PlotPage;
class ReportDocument;
class RunController;
class RunPanel;
class SpeedupView;
class TimingView;
class TokenMapView;
struct UserError;

/// The app window: the empty state until a report is open, then the views in tabs, the run panel
/// in a dock, and an error banner above both.
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  ReportDocument* document() const { return m_document; }
  RunPanel* runPanel() const { return m_runPanel; }
  RunController* runController() const { return m_runs; }
  ErrorBanner* banner() const { return m_banner; }
  bool isShowingEmptyState() const;

  OverviewView* overview() const { return m_overview; }
  LayerTableView* layerTable() const { return m_layers; }
  HeatmapView* heatmap() const { return m_heatmap; }
  TokenMapView* tokenMap() const { return m_tokenMap; }
  DistributionsView* distributions() const { return m_distributions; }
  TimingView* timing() const { return m_timing; }
  SpeedupView* speedup() const { return m_speedup; }
  KernelsView* kernels() const { return m_kernels; }
  CompareView* compare() const { return m_compare; }
  /// Every plot, in tab order (exports, the PDF report).
  QList<PlotPage*> plotPages() const;

  /// View names for --view and showView: overview, layers, heatmap, tokens, distributions, timing,
  /// speedup, kernels, compare.
  static QStringList viewNames();
  bool showView(const QString& name);
  QString currentViewName() const;

  /// Opens a report JSON; on failure the banner says why and the current report stays.
  bool openReport(const QString& path);
  bool openComparison(const QString& path);
  /// Puts a checkpoint directory into the run panel, ready to Run.
  void openCheckpoint(const QString& directory);
  /// A directory is a checkpoint, anything else a report.
  void openPath(const QString& path);
  /// Shows a report produced without a file (a finished run).
  void showReport(std::shared_ptr<const twell::Report> report, const QString& sourcePath);

  bool saveReport(const QString& path, QString* error);
  bool exportReport(const QString& path, twell::ExportFormat format, QString* error);
  bool exportPdfReport(const QString& path, QString* error);
  /// Every plot as <folder>/<name>.png.
  bool exportAllPlots(const QString& folder, QString* error);

  QStringList recentFiles() const;

 public slots:
  /// Profiles the built-in demo model with small defaults.
  void tryDemo();
  void showError(const twellscope::UserError& error);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void rebuildRecentMenu();
  void addRecentFile(const QString& path);
  void chooseReport();
  void chooseCheckpoint();
  void chooseComparison();
  void exportInteractively(twell::ExportFormat format);
  void saveInteractively();
  void exportPdfInteractively();
  void exportPlotsInteractively();
  void onReportChanged();
  void onRunFinished(std::shared_ptr<const twell::Report> report);
  bool writeText(const QString& path, const std::string& text, QString* error);

  ReportDocument* m_document;
  RunController* m_runs;
  ErrorBanner* m_banner;
  QStackedWidget* m_stack;
  EmptyState* m_empty;
  QTabWidget* m_tabs;
  RunPanel* m_runPanel;
  QDockWidget* m_runDock;
  QMenu* m_recentMenu = nullptr;
  QList<QAction*> m_reportActions;

  OverviewView* m_overview;
  LayerTableView* m_layers;
  HeatmapView* m_heatmap;
  TokenMapView* m_tokenMap;
  DistributionsView* m_distributions;
  TimingView* m_timing;
  SpeedupView* m_speedup;
  KernelsView* m_kernels;
  CompareView* m_compare;
};

}  // namespace twellscope
