// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>

#include "runtime.hpp"
#include "twell/report.hpp"
#include "user_errors.hpp"

class QThread;

namespace twellscope {

/// What the run panel asks for.
struct RunRequest {
  QString model;      ///< a checkpoint directory, or kDemoModel
  QString tokenFile;  ///< empty: seeded random ids (config.seed)
  twell::ProfileConfig config;
  twell::runtime::BackendChoice backend = twell::runtime::BackendChoice::Auto;
  int device = 0;
};
inline const QString kDemoModel = QStringLiteral("demo");

/// Runs one profiling session at a time on a worker thread: opens the checkpoint (generating the
/// demo model on first use), loads the backend and runs twell::Session. Progress arrives as it
/// happens; the report arrives whole, through a queued call, when the run is done.
class RunController : public QObject {
  Q_OBJECT

 public:
  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;
  bool isRunning() const { return m_thread != nullptr; }

 public slots:
  /// Ignored while a run is in flight.
  void start(const RunRequest& request);
  /// Asks the running session to stop at its next unit of work.
  void cancel();

 signals:
  void started();
  void progressed(double fraction, const QString& text);
  void finished(std::shared_ptr<const twell::Report> report);
  void failed(const twellscope::UserError& error);
  void cancelled();

 private:
  void onThreadFinished(quint64 job);

  QThread* m_thread = nullptr;
  std::shared_ptr<std::atomic<bool>> m_cancel;
  quint64 m_job = 0;
};

}  // namespace twellscope
