// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>

#include "twell/backend.hpp"
#include "twell/matrix.hpp"

namespace twell {

/// Sums from which ErrorMetrics follow; the GPU accumulates these on the device.
struct ErrorSums {
  double reference_sq = 0;   ///< sum a^2
  double candidate_sq = 0;   ///< sum b^2
  double diff_sq = 0;        ///< sum (b - a)^2
  double dot = 0;            ///< sum a * b
  double max_abs = 0;        ///< max |b - a|
};
ErrorMetrics error_metrics_from_sums(const ErrorSums& sums);
/// Relative Frobenius error, max abs error and cosine of `candidate` against `reference`.
ErrorMetrics compare_outputs(const Matrix& reference, const Matrix& candidate);

}  // namespace twell
