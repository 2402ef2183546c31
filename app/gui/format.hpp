// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <QString>
#include <optional>

namespace twellscope {

/// Shown where a value was not measured (a path not timed, a layer missing from one report).
inline const QString kNotMeasured = QStringLiteral("—");

QString formatMicroseconds(double us);
QString formatPercent(double fraction, int decimals = 2);
QString formatSpeedup(double speedup);
QString formatNumber(double value, int significant = 4);
QString formatOptional(const std::optional<double>& value, QString (*format)(double));
/// Signed difference with an explicit "+".
QString formatDelta(const std::optional<double>& value, QString (*format)(double));

}  // namespace twellscope
