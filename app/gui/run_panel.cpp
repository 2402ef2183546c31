// SPDX-License-Identifier: GPL-3.0-or-later
#include "run_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "twell/activation_summary.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twellscope {
namespace {

QSpinBox* spinBox(QWidget* parent, int minimum, int maximum, int value) {
  auto* box = new QSpinBox(parent);
  box->setRange(minimum, maximum);
  box->setValue(value);
  return box;
}

}  // namespace

RunPanel::RunPanel(QWidget* parent) : QWidget(parent) {
  const twell::ProfileConfig defaults;
  m_model = new QLineEdit(this);
  m_model->setObjectName(QStringLiteral("model"));
  m_model->setPlaceholderText(tr("checkpoint directory, or \"demo\""));
  auto* browse = new QPushButton(tr("Browse…"), this);
  auto* demo = new QPushButton(tr("Demo"), this);
  demo->setToolTip(tr("The built-in demo model (generated on first use)"));
  connect(browse, &QPushButton::clicked, this, &RunPanel::browseModel);
  connect(demo, &QPushButton::clicked, this, [this] { setModel(kDemoModel); });
  auto* modelRow = new QHBoxLayout;
  modelRow->addWidget(m_model, 1);
  modelRow->addWidget(browse);
  modelRow->addWidget(demo);

  m_batch = spinBox(this, 1, 4096, int(defaults.batch));
  m_sequence = spinBox(this, 1, 1 << 16, int(defaults.sequence));
  auto* shape = new QHBoxLayout;
  shape->addWidget(m_batch);
  shape->addWidget(new QLabel(QStringLiteral("×"), this));
  shape->addWidget(m_sequence);

  m_tokenSource = new QComboBox(this);
  m_tokenSource->addItem(tr("Random ids, seed"));
  m_tokenSource->addItem(tr("From a file"));
  m_seed = spinBox(this, 0, 1 << 30, int(defaults.seed));
  m_tokenFile = new QLineEdit(this);
  m_tokenFile->setPlaceholderText(tr("one sequence of ids per line"));
  m_tokenBrowse = new QPushButton(tr("…"), this);
  connect(m_tokenBrowse, &QPushButton::clicked, this, &RunPanel::browseTokens);
  auto* tokens = new QHBoxLayout;
  tokens->addWidget(m_tokenSource);
  tokens->addWidget(m_seed);
  auto* tokenFile = new QHBoxLayout;
  tokenFile->addWidget(m_tokenFile, 1);
  tokenFile->addWidget(m_tokenBrowse);

  m_dense = new QCheckBox(tr("dense"), this);
  m_twell = new QCheckBox(tr("TwELL"), this);
  m_dense->setChecked(true);
  m_twell->setChecked(true);
  auto* paths = new QHBoxLayout;
  paths->addWidget(m_dense);
  paths->addWidget(m_twell);
  m_compression = new QComboBox(this);
  for (std::uint32_t c : twell::kCompressionFactors)
    m_compression->addItem(tr("C=%1 (tile capacity %2)").arg(c).arg(twell::twell_tile_capacity(c)), c);
  m_highestPrecision = new QCheckBox(tr("fp32 up/down products"), this);
  // The CUDA backend's TwELL kernels by name (`twellscope-cli devices --kernels` describes them);
  // auto lets it pick the fastest measured on the device.
  const auto kernelChoice = [this](std::span<const std::string_view> names, const QString& tip) {
    auto* box = new QComboBox(this);
    for (std::string_view name : names) box->addItem(QString::fromUtf8(name.data(), qsizetype(name.size())));
    box->setToolTip(tip);
    return box;
  };
  m_gateKernel = kernelChoice(twell::twell_gate_kernel_names(), tr("The gate GEMM + pack kernel"));
  m_upDownKernel = kernelChoice(twell::twell_up_down_kernel_names(), tr("The up/down consumer"));
  m_overflowRoute =
      kernelChoice(twell::twell_overflow_route_names(), tr("What happens to rows that overflow a tile"));
  auto* kernels = new QHBoxLayout;
  kernels->addWidget(m_gateKernel);
  kernels->addWidget(m_upDownKernel);
  kernels->addWidget(m_overflowRoute);
  m_warmup = spinBox(this, 0, 100, int(defaults.warmup));
  m_repetitions = spinBox(this, 1, 1000, int(defaults.repetitions));
  auto* reps = new QHBoxLayout;
  reps->addWidget(new QLabel(tr("warm-up"), this));
  reps->addWidget(m_warmup);
  reps->addWidget(new QLabel(tr("timed"), this));
  reps->addWidget(m_repetitions);
  m_endToEnd = new QCheckBox(tr("end-to-end forwards"), this);
  m_endToEnd->setChecked(defaults.end_to_end);
  m_dispatchBreakEven = new QDoubleSpinBox(this);
  m_dispatchBreakEven->setRange(0.0, 99.99);
  m_dispatchBreakEven->setDecimals(2);
  m_dispatchBreakEven->setSingleStep(0.05);
  m_dispatchBreakEven->setSuffix(tr(" %"));
  m_dispatchBreakEven->setSpecialValueText(tr("the device's break-even"));
  m_dispatchBreakEven->setToolTip(
      tr("Density below which the per-layer dispatch runs a layer on TwELL, e.g. this model's own "
         "crossing from an earlier profile"));

  m_backend = new QComboBox(this);
  m_backend->addItem(tr("auto (CUDA if present)"), int(twell::runtime::BackendChoice::Auto));
  m_backend->addItem(tr("CUDA"), int(twell::runtime::BackendChoice::Cuda));
  m_backend->addItem(tr("CPU"), int(twell::runtime::BackendChoice::Cpu));
  m_device = spinBox(this, 0, 64, 0);
  auto* backend = new QHBoxLayout;
  backend->addWidget(m_backend, 1);
  backend->addWidget(new QLabel(tr("device"), this));
  backend->addWidget(m_device);

  auto* form = new QFormLayout;
  form->addRow(tr("Model"), modelRow);
  form->addRow(tr("Batch × sequence"), shape);
  form->addRow(tr("Tokens"), tokens);
  form->addRow(QString(), tokenFile);
  form->addRow(tr("Paths"), paths);
  form->addRow(tr("TwELL"), m_compression);
  form->addRow(QString(), m_highestPrecision);
  form->addRow(tr("TwELL kernels"), kernels);
  form->addRow(tr("Repetitions"), reps);
  form->addRow(QString(), m_endToEnd);
  form->addRow(tr("Dispatch below"), m_dispatchBreakEven);
  form->addRow(tr("Backend"), backend);

  m_run = new QPushButton(tr("Run"), this);
  m_run->setDefault(true);
  m_cancel = new QPushButton(tr("Cancel"), this);
  m_progress = new QProgressBar(this);
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_progress->setTextVisible(false);
  m_status = new QLabel(this);
  m_status->setWordWrap(true);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_run);
  buttons->addWidget(m_cancel);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addLayout(buttons);
  layout->addWidget(m_progress);
  layout->addWidget(m_status);
  layout->addStretch();

  connect(m_run, &QPushButton::clicked, this, [this] { emit runRequested(request()); });
  connect(m_cancel, &QPushButton::clicked, this, &RunPanel::cancelRequested);
  connect(m_model, &QLineEdit::textChanged, this, &RunPanel::updateEnabled);
  connect(m_tokenSource, &QComboBox::currentIndexChanged, this, &RunPanel::updateEnabled);
  connect(m_tokenFile, &QLineEdit::textChanged, this, &RunPanel::updateEnabled);
  connect(m_dense, &QCheckBox::toggled, this, &RunPanel::updateEnabled);
  connect(m_twell, &QCheckBox::toggled, this, &RunPanel::updateEnabled);
  updateEnabled();
}

RunRequest RunPanel::request() const {
  RunRequest r;
  r.model = model();
  r.config.batch = std::uint32_t(m_batch->value());
  r.config.sequence = std::uint32_t(m_sequence->value());
  r.config.seed = std::uint64_t(m_seed->value());
  const bool fromFile = m_tokenSource->currentIndex() == 1;
  r.tokenFile = fromFile ? m_tokenFile->text().trimmed() : QString();
  r.config.token_source =
      fromFile ? r.tokenFile.toStdString() : "random(seed=" + std::to_string(r.config.seed) + ")";
  r.config.paths.clear();
  if (m_dense->isChecked()) r.config.paths.push_back("dense");
  if (m_twell->isChecked()) r.config.paths.push_back("twell");
  r.config.compression = m_compression->currentData().toUInt();
  r.config.highest_precision = m_highestPrecision->isChecked();
  r.config.twell_kernels.gate = m_gateKernel->currentText().toStdString();
  r.config.twell_kernels.up_down = m_upDownKernel->currentText().toStdString();
  r.config.twell_kernels.overflow = m_overflowRoute->currentText().toStdString();
  r.config.warmup = std::uint32_t(m_warmup->value());
  r.config.repetitions = std::uint32_t(m_repetitions->value());
  r.config.end_to_end = m_endToEnd->isChecked();
  if (m_dispatchBreakEven->value() > 0.0) r.config.dispatch_break_even = m_dispatchBreakEven->value() / 100.0;
  r.backend = twell::runtime::BackendChoice(m_backend->currentData().toInt());
  r.device = m_device->value();
  return r;
}

void RunPanel::setModel(const QString& modelDirectoryOrDemo) {
  m_model->setText(modelDirectoryOrDemo);
}

QString RunPanel::model() const {
  return m_model->text().trimmed();
}

void RunPanel::setTokens(int batch, int sequence) {
  m_batch->setValue(batch);
  m_sequence->setValue(sequence);
}

void RunPanel::setRepetitions(int warmup, int repetitions) {
  m_warmup->setValue(warmup);
  m_repetitions->setValue(repetitions);
}

void RunPanel::setBackend(twell::runtime::BackendChoice choice) {
  m_backend->setCurrentIndex(m_backend->findData(int(choice)));
}

void RunPanel::setDispatchBreakEven(std::optional<double> density) {
  m_dispatchBreakEven->setValue(density ? *density * 100.0 : 0.0);
}

void RunPanel::setTwellKernels(const twell::TwellKernelRequest& kernels) {
  const auto select = [](QComboBox* box, const std::string& name) {
    const int index = box->findText(QString::fromStdString(name));
    if (index >= 0) box->setCurrentIndex(index);
  };
  select(m_gateKernel, kernels.gate);
  select(m_upDownKernel, kernels.up_down);
  select(m_overflowRoute, kernels.overflow);
}

QString RunPanel::statusText() const {
  return m_status->text();
}

void RunPanel::setRunning(bool running) {
  m_running = running;
  if (running) m_progress->setValue(0);
  updateEnabled();
}

void RunPanel::setProgress(double fraction, const QString& text) {
  m_progress->setValue(int(std::clamp(fraction, 0.0, 1.0) * 1000));
  m_status->setText(text);
}

void RunPanel::setStatus(const QString& text) {
  m_status->setText(text);
}

void RunPanel::browseModel() {
  const QString directory =
      QFileDialog::getExistingDirectory(this, tr("Checkpoint directory"), m_model->text());
  if (!directory.isEmpty()) setModel(directory);
}

void RunPanel::browseTokens() {
  const QString file = QFileDialog::getOpenFileName(this, tr("Token file"), m_tokenFile->text(),
                                                    tr("Text (*.txt);;All files (*)"));
  if (file.isEmpty()) return;
  m_tokenFile->setText(file);
  m_tokenSource->setCurrentIndex(1);
}

void RunPanel::updateEnabled() {
  const bool fromFile = m_tokenSource->currentIndex() == 1;
  m_seed->setEnabled(!fromFile);
  m_tokenFile->setEnabled(fromFile);
  m_tokenBrowse->setEnabled(fromFile);
  const bool ready = !model().isEmpty() && (m_dense->isChecked() || m_twell->isChecked()) &&
                     (!fromFile || !m_tokenFile->text().trimmed().isEmpty());
  m_run->setEnabled(ready && !m_running);
  m_run->setToolTip(ready ? QString()
                          : tr("Choose a model (a checkpoint directory or the demo) and at least one path"));
  m_cancel->setEnabled(m_running);
}

}  // namespace twellscope
