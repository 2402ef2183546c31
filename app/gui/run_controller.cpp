// SPDX-License-Identifier: GPL-3.0-or-later
#include "run_controller.hpp"

#include <QPointer>
#include <QThread>
#include <new>

#include "twell/checkpoint.hpp"
#include "twell/model_generator.hpp"
#include "twell/session.hpp"
#include "twell/tokens.hpp"

namespace twellscope {
namespace {

// Before the session reports its own progress: demo generation, opening, loading weights.
constexpr double kPrepareShare = 0.1;

QString stageText(const twell::SessionProgress& p) {
  QString text;
  if (p.stage == "layers")
    text = QObject::tr("Profiling layers: %1 of %2").arg(p.layer).arg(p.layer_count);
  else if (p.stage == "end_to_end")
    text = QObject::tr("End-to-end forwards: %1 of %2").arg(p.layer).arg(p.layer_count);
  else
    text = QString::fromStdString(p.stage);
  if (p.seconds_left) text += QObject::tr(", about %1 s left").arg(*p.seconds_left, 0, 'f', 0);
  return text;
}

}  // namespace

RunController::RunController(QObject* parent) : QObject(parent) {}

RunController::~RunController() {
  if (m_thread) {
    m_cancel->store(true);
    m_thread->wait();
    delete m_thread;
  }
}

void RunController::cancel() {
  if (m_cancel) m_cancel->store(true);
}

void RunController::start(const RunRequest& request) {
  if (m_thread) return;
  const quint64 job = ++m_job;
  m_cancel = std::make_shared<std::atomic<bool>>(false);
  auto cancelFlag = m_cancel;
  QPointer<RunController> self(this);
  // Progress and the result go back through queued calls on this object, which lives in the GUI
  // thread; `self` drops them if the controller is gone.
  auto post = [self, job](double fraction, QString text) {
    QMetaObject::invokeMethod(
        self,
        [self, job, fraction, text] {
          if (self && self->m_job == job) emit self->progressed(fraction, text);
        },
        Qt::QueuedConnection);
  };
  m_thread = QThread::create([self, job, request, cancelFlag, post] {
    std::shared_ptr<const twell::Report> result;  // a partial one too, alongside `error`
    std::optional<UserError> error;
    bool wasCancelled = false;
    const QString action = QObject::tr("Profiling %1").arg(request.model);
    try {
      std::filesystem::path directory = request.model.toStdString();
      if (request.model == kDemoModel) {
        post(0.0, QObject::tr("Preparing the demo model (generated once, then cached)…"));
        directory = twell::ensure_demo_model(
            [&](const std::string& line) { post(0.02, QString::fromStdString(line)); });
      }
      // The device first: "no GPU" is the most likely failure and needs no checkpoint to report.
      twell::runtime::Runtime runtime = twell::runtime::make_runtime(request.backend, request.device);
      post(kPrepareShare * 0.3, QObject::tr("Opening the checkpoint…"));
      const twell::Checkpoint checkpoint = twell::Checkpoint::open(directory);
      post(kPrepareShare * 0.5, QObject::tr("Loading weights onto %1…")
                                    .arg(QString::fromStdString(runtime.backend->device().name)));
      runtime.backend->load(checkpoint);
      if (cancelFlag->load()) throw twell::Error(twell::Error::Kind::Cancelled, "cancelled");
      const twell::ModelSummary model = twell::summarize_model(checkpoint, request.model.toStdString());
      const auto vocab = std::uint32_t(model.config.vocab_size);
      const twell::TokenBatch tokens =
          request.tokenFile.isEmpty() ? twell::random_tokens(request.config.batch, request.config.sequence,
                                                             vocab, request.config.seed)
                                      : twell::read_token_file(request.tokenFile.toStdString(), vocab);
      twell::Session session(*runtime.backend, *runtime.tracer, model);
      twell::Report run = session.run(request.config, tokens, [&](const twell::SessionProgress& p) {
        post(kPrepareShare + (1 - kPrepareShare) * p.fraction, stageText(p));
        return !cancelFlag->load();
      });
      if (!runtime.note.empty()) run.warnings.push_back(runtime.note);
      result = std::make_shared<const twell::Report>(std::move(run));
    } catch (const twell::IncompleteRunError& e) {
      // Show what finished, then say what stopped the rest (and, for a lost GPU context, to restart).
      result = std::make_shared<const twell::Report>(e.partial_report());
      error = describeError(action, e);
    } catch (const twell::Error& e) {
      if (e.kind() == twell::Error::Kind::Cancelled)
        wasCancelled = true;
      else
        error = describeError(action, e);
    } catch (const std::exception& e) {
      error = describeError(action, e);
    }
    QMetaObject::invokeMethod(
        self,
        [self, job, result, error, wasCancelled] {
          if (!self || self->m_job != job) return;
          self->onThreadFinished(job);
          if (result) emit self->finished(result);
          if (wasCancelled)
            emit self->cancelled();
          else if (error)
            emit self->failed(*error);
        },
        Qt::QueuedConnection);
  });
  m_thread->start();
  emit started();
}

void RunController::onThreadFinished(quint64) {
  // The worker posts this as its last act, so joining is immediate.
  m_thread->wait();
  delete m_thread;
  m_thread = nullptr;
  m_cancel.reset();
}

}  // namespace twellscope
