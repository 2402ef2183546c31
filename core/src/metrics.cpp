// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "twell/error.hpp"

namespace twell {

ErrorMetrics error_metrics_from_sums(const ErrorSums& sums) {
  ErrorMetrics metrics;
  metrics.max_abs = sums.max_abs;
  // A zero reference has no scale to be relative to: matching it exactly is error 0, anything else
  // is infinitely wrong (fails every tolerance) rather than NaN.
  if (sums.reference_sq > 0) {
    metrics.rel_frobenius = std::sqrt(sums.diff_sq) / std::sqrt(sums.reference_sq);
  } else {
    metrics.rel_frobenius = sums.diff_sq == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  if (std::isnan(sums.diff_sq)) metrics.rel_frobenius = std::numeric_limits<double>::quiet_NaN();
  // Cosine: two zero vectors point the same way (1); one zero vector against a non-zero one is 0.
  if (sums.reference_sq > 0 && sums.candidate_sq > 0) {
    metrics.cosine =
        std::clamp(sums.dot / (std::sqrt(sums.reference_sq) * std::sqrt(sums.candidate_sq)), -1.0, 1.0);
  } else {
    metrics.cosine = sums.reference_sq == 0 && sums.candidate_sq == 0 ? 1.0 : 0.0;
  }
  if (std::isnan(sums.dot) || std::isnan(sums.candidate_sq))
    metrics.cosine = std::numeric_limits<double>::quiet_NaN();
  return metrics;
}

ErrorMetrics compare_outputs(const Matrix& reference, const Matrix& candidate) {
  if (reference.rows != candidate.rows || reference.cols != candidate.cols ||
      reference.data.size() != candidate.data.size()) {
    throw Error(Error::Kind::InvalidInput,
                "compare_outputs: reference is [" + std::to_string(reference.rows) + ", " +
                    std::to_string(reference.cols) + "] but candidate is [" + std::to_string(candidate.rows) +
                    ", " + std::to_string(candidate.cols) + "]");
  }
  ErrorSums sums;
  bool saw_nan = false;
  for (std::size_t i = 0; i < reference.data.size(); ++i) {
    const double a = reference.data[i];
    const double b = candidate.data[i];
    const double diff = b - a;
    sums.reference_sq += a * a;
    sums.candidate_sq += b * b;
    sums.diff_sq += diff * diff;
    sums.dot += a * b;
    if (std::isnan(diff)) saw_nan = true;
    sums.max_abs = std::max(sums.max_abs, std::abs(diff));
  }
  // NaN must not hide behind std::max: a candidate with NaNs fails every check.
  if (saw_nan) sums.max_abs = std::numeric_limits<double>::quiet_NaN();
  return error_metrics_from_sums(sums);
}

}  // namespace twell
