// SPDX-License-Identifier: GPL-3.0-or-later
#include "overview_view.hpp"

#include <QLabel>
#include <QListWidget>
#include <QStyle>
#include <QVBoxLayout>

#include "format.hpp"
#include "report_document.hpp"

namespace twellscope {
namespace {

QString tokensPerMs(const std::optional<double>& value, const std::optional<double>& occupied) {
  if (!value) return kNotMeasured;
  const QString rate = QObject::tr("%1 tokens/ms").arg(formatNumber(*value, 5));
  return occupied ? QObject::tr("%1, device busy %2").arg(rate, formatPercent(*occupied, 0)) : rate;
}

QString bytesText(std::uint64_t bytes) {
  return bytes ? QStringLiteral("%1 GiB").arg(double(bytes) / (1024.0 * 1024 * 1024), 0, 'f', 1) : QString();
}

}  // namespace

QList<QPair<QString, QString>> summaryRows(const ReportDocument& document) {
  QList<QPair<QString, QString>> rows;
  if (!document.hasReport()) return rows;
  const twell::Report& r = document.report();
  const auto& o = document.overview();
  const auto& c = r.model.config;
  auto add = [&](const QString& label, const QString& value) { rows.append({label, value}); };
  add(QObject::tr("Model"),
      QStringLiteral("%1 (%2): %3 layers, D=%4, N=%5, %6")
          .arg(QString::fromStdString(r.model.source), QString::fromStdString(c.model_type))
          .arg(c.num_hidden_layers)
          .arg(c.hidden_size)
          .arg(c.intermediate_size)
          .arg(QString::fromStdString(c.dtype)));
  add(QObject::tr("Activation"),
      QStringLiteral("%1 — %2").arg(QString::fromLatin1(twell::to_string(r.model.activation.activation)),
                                    QString::fromStdString(r.model.activation.reason)));
  QString device = QStringLiteral("%1: %2").arg(QString::fromStdString(r.device.backend),
                                                QString::fromStdString(r.device.name));
  if (!r.device.compute_capability.empty())
    device += QObject::tr(", sm %1").arg(QString::fromStdString(r.device.compute_capability));
  if (!r.device.kernel_family.empty())
    device += QObject::tr(", kernels %1").arg(QString::fromStdString(r.device.kernel_family));
  if (const QString memory = bytesText(r.device.memory_bytes); !memory.isEmpty())
    device += QStringLiteral(", ") + memory;
  add(QObject::tr("Device"), device);
  QString tracer = QObject::tr("%1 (%2 clock%3)")
                       .arg(QString::fromStdString(r.tracer.name), QString::fromStdString(r.tracer.clock),
                            r.tracer.per_kernel ? QObject::tr(", per kernel") : QObject::tr(", per region"));
  if (!r.tracer.fallback_reason.empty())
    tracer += QObject::tr(" — fallback: %1").arg(QString::fromStdString(r.tracer.fallback_reason));
  add(QObject::tr("Tracer"), tracer);
  add(QObject::tr("Tokens"), QObject::tr("batch %1 × sequence %2, %3")
                                 .arg(r.config.batch)
                                 .arg(r.config.sequence)
                                 .arg(QString::fromStdString(r.config.token_source)));
  add(QObject::tr("TwELL"),
      QObject::tr("C=%1, %2 warm-up + %3 timed repetitions%4")
          .arg(r.config.compression)
          .arg(r.config.warmup)
          .arg(r.config.repetitions)
          .arg(r.config.highest_precision ? QObject::tr(", fp32 products") : QString()));
  if (!r.config.twell_kernels.is_auto())
    add(QObject::tr("TwELL kernels"), QString::fromStdString(twell::to_string(r.config.twell_kernels)));
  add(QObject::tr("End to end, dense"), tokensPerMs(o.dense_tokens_per_ms, o.dense_occupied));
  add(QObject::tr("End to end, TwELL"), tokensPerMs(o.twell_tokens_per_ms, o.twell_occupied));
  add(QObject::tr("End-to-end speedup"), formatOptional(o.end_to_end_speedup, formatSpeedup));
  if (o.dispatch_tokens_per_ms) {
    add(QObject::tr("End to end, per-layer dispatch"),
        tokensPerMs(o.dispatch_tokens_per_ms, o.dispatch_occupied));
    add(QObject::tr("Dispatch speedup"), formatOptional(o.dispatch_speedup, formatSpeedup));
  }
  add(QObject::tr("Overall density"), formatPercent(o.overall_density, 3));
  add(QObject::tr("Dead neurons"),
      QObject::tr("%1 of %2 (%3)")
          .arg(o.dead_neurons)
          .arg(o.neurons)
          .arg(formatPercent(o.neurons ? double(o.dead_neurons) / double(o.neurons) : 0, 1)));
  const auto& be = document.breakEven();
  add(QObject::tr("Break-even density"),
      be.density ? QObject::tr("%1 (fit over %2 layers)").arg(formatPercent(*be.density, 2)).arg(be.points)
                 : QObject::tr("not reached / too few layers"));
  // Counted from the layers' own timings, not from their densities against the break-even above.
  add(QObject::tr("Layers where TwELL is slower"),
      o.layers_timed ? QObject::tr("%1 of %2").arg(o.layers_twell_slower).arg(o.layers_timed)
                     : QObject::tr("no layer has both paths timed"));
  add(QObject::tr("Created"),
      QStringLiteral("%1 on %2 by twellscope %3 (%4)")
          .arg(QString::fromStdString(r.created_utc), QString::fromStdString(r.host),
               QString::fromStdString(r.tool_version), QString::fromStdString(r.tool_commit)));
  return rows;
}

OverviewView::OverviewView(ReportDocument* document, QWidget* parent)
    : QWidget(parent), m_document(document) {
  m_summary = new QLabel(this);
  m_summary->setObjectName(QStringLiteral("summary"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_summary->setWordWrap(true);
  m_warnings = new QListWidget(this);
  m_warnings->setObjectName(QStringLiteral("warnings"));
  m_warnings->setWordWrap(true);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_summary);
  layout->addWidget(new QLabel(tr("<b>Warnings</b>"), this));
  layout->addWidget(m_warnings, 1);
  connect(document, &ReportDocument::reportChanged, this, &OverviewView::rebuild);
  rebuild();
}

void OverviewView::rebuild() {
  QString html = QStringLiteral("<table cellspacing='4'>");
  for (const auto& [label, value] : summaryRows(*m_document))
    html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                .arg(label.toHtmlEscaped(), value.toHtmlEscaped());
  html += QStringLiteral("</table>");
  m_summary->setText(m_document->hasReport() ? html : QString());
  m_warnings->clear();
  if (!m_document->hasReport()) return;
  const QIcon icon = style()->standardIcon(QStyle::SP_MessageBoxWarning);
  for (const auto& warning : m_document->overview().warnings)
    m_warnings->addItem(new QListWidgetItem(icon, QString::fromStdString(warning)));
  if (m_warnings->count() == 0) m_warnings->addItem(tr("None"));
}

QString OverviewView::summaryText() const {
  QStringList lines;
  for (const auto& [label, value] : summaryRows(*m_document)) lines << label + QStringLiteral(": ") + value;
  return lines.join(QLatin1Char('\n'));
}

QStringList OverviewView::warnings() const {
  QStringList list;
  if (!m_document->hasReport()) return list;
  for (const auto& warning : m_document->overview().warnings) list << QString::fromStdString(warning);
  return list;
}

}  // namespace twellscope
