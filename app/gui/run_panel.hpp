// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QWidget>
#include <optional>

#include "run_controller.hpp"
#include "twell/twell_kernel_request.hpp"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace twellscope {

/// The run configuration (model, tokens, paths, C, repetitions, backend) with Run, Cancel and a
/// progress bar. It only asks; the main window runs.
class RunPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunPanel(QWidget* parent = nullptr);
  /// The request the form describes now.
  RunRequest request() const;
  void setModel(const QString& modelDirectoryOrDemo);
  QString model() const;
  /// Form values (tests and the demo button set them directly).
  void setTokens(int batch, int sequence);
  void setRepetitions(int warmup, int repetitions);
  void setBackend(twell::runtime::BackendChoice choice);
  /// The density (a fraction) below which the dispatch runs a layer on TwELL; empty: the device's.
  void setDispatchBreakEven(std::optional<double> density);
  /// The TwELL kernels by name; a name the boxes do not offer leaves that box as it was.
  void setTwellKernels(const twell::TwellKernelRequest& kernels);
  QPushButton* runButton() const { return m_run; }
  QPushButton* cancelButton() const { return m_cancel; }
  QProgressBar* progressBar() const { return m_progress; }
  QString statusText() const;

 public slots:
  void setRunning(bool running);
  void setProgress(double fraction, const QString& text);
  void setStatus(const QString& text);

 signals:
  void runRequested(const twellscope::RunRequest& request);
  void cancelRequested();

 private:
  void browseModel();
  void browseTokens();
  void updateEnabled();

  QLineEdit* m_model;
  QSpinBox *m_batch, *m_sequence, *m_seed, *m_warmup, *m_repetitions, *m_device;
  QComboBox *m_tokenSource, *m_compression, *m_backend;
  QComboBox *m_gateKernel, *m_upDownKernel, *m_overflowRoute;  ///< TwELL kernels by name, "auto" first
  QDoubleSpinBox* m_dispatchBreakEven;  ///< percent; its minimum (0) means the device's
  QLineEdit* m_tokenFile;
  QPushButton* m_tokenBrowse;
  QCheckBox *m_dense, *m_twell, *m_endToEnd, *m_highestPrecision;
  QPushButton *m_run, *m_cancel;
  QProgressBar* m_progress;
  QLabel* m_status;
  bool m_running = false;
};

}  // namespace twellscope
