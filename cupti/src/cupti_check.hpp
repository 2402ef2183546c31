// SPDX-License-Identifier: GPL-3.0-or-later
// Error checks for CUPTI and CUDA runtime calls: every failure names the call and the library's
// own message.
#pragma once
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <string>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"

namespace twell::gpu_trace::detail {

inline std::string cupti_result_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
  return text;
}

/// "cuptiActivityFlushAll failed: CUPTI_ERROR_...".
inline std::string cupti_failure(const char* call, CUptiResult result) {
  return std::string(call) + " failed: " + cupti_result_text(result);
}

inline void check_cupti(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS) throw Error(Error::Kind::Device, cupti_failure(call, result));
}

inline void check_cuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return;
  std::string message =
      std::string(call) + " failed: " + cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")";
  // A fault of earlier work can surface here first: say what it means, as the kernels do.
  if (cuda::is_sticky_cuda_error(result)) message += cuda::kLostContextAdvice;
  throw Error(Error::Kind::Device, message);
}

}  // namespace twell::gpu_trace::detail
