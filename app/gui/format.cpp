// SPDX-License-Identifier: GPL-3.0-or-later
#include "format.hpp"

#include <QLocale>

namespace twellscope {

QString formatMicroseconds(double us) {
  if (us >= 10000) return QStringLiteral("%1 ms").arg(us / 1000.0, 0, 'f', 2);
  return QStringLiteral("%1 µs").arg(us, 0, 'f', us < 10 ? 3 : 1);
}

QString formatPercent(double fraction, int decimals) {
  return QStringLiteral("%1 %").arg(fraction * 100.0, 0, 'f', decimals);
}

QString formatSpeedup(double speedup) {
  return QStringLiteral("%1×").arg(speedup, 0, 'f', 3);
}

QString formatNumber(double value, int significant) {
  return QString::number(value, 'g', significant);
}

QString formatOptional(const std::optional<double>& value, QString (*format)(double)) {
  return value ? format(*value) : kNotMeasured;
}

QString formatDelta(const std::optional<double>& value, QString (*format)(double)) {
  if (!value) return kNotMeasured;
  return (*value > 0 ? QStringLiteral("+") : QString()) + format(*value);
}

}  // namespace twellscope
