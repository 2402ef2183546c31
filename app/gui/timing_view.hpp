// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>
#include <vector>

#include "plot_page.hpp"
#include "twell/report_views.hpp"

namespace twellscope {

class ReportDocument;

/// Dense and TwELL median time per layer as grouped bars, the speedup on the right axis. Click
/// selects a layer.
class LayerTimingPlot : public PlotPage {
  Q_OBJECT

 public:
  LayerTimingPlot(ReportDocument* document, QWidget* parent = nullptr);
  QCPBars* denseBars() const { return m_dense; }
  QCPBars* twellBars() const { return m_twell; }
  QCPGraph* speedupGraph() const { return m_speedup; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;
  void clicked(double key, double value) override;

 private:
  void rebuild();
  void showSelection();
  int layerAt(double key) const;

  ReportDocument* m_document;
  QCPBars *m_dense, *m_twell;
  QCPGraph* m_speedup;
  QCPItemRect* m_selection;
};

/// Kernels (or ops, for a CPU run) of the selected layer, per path.
class KernelBreakdownPlot : public PlotPage {
  Q_OBJECT

 public:
  KernelBreakdownPlot(ReportDocument* document, QWidget* parent = nullptr);
  const std::vector<twell::views::BreakdownEntry>& entries() const { return m_entries; }

 public slots:
  void resetView() override;

 protected:
  QString describe(double key, double value) const override;

 private:
  void rebuild();

  ReportDocument* m_document;
  std::vector<twell::views::BreakdownEntry> m_entries;
};

class TimingView : public QWidget {
  Q_OBJECT

 public:
  TimingView(ReportDocument* document, QWidget* parent = nullptr);
  LayerTimingPlot* layers() const { return m_layers; }
  KernelBreakdownPlot* breakdown() const { return m_breakdown; }

 private:
  LayerTimingPlot* m_layers;
  KernelBreakdownPlot* m_breakdown;
};

}  // namespace twellscope
