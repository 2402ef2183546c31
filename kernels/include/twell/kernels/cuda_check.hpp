// SPDX-License-Identifier: GPL-3.0-or-later
// Checked CUDA / cuBLAS calls: every failure becomes a twell::Error naming the call, the file and
// the line, with Kind::OutOfMemory for allocation failures and Kind::Device otherwise.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "twell/error.hpp"

namespace twell::cuda {

/// Errors after which the CUDA context is corrupt: every later call in this process fails too, so
/// only a new process (or cudaDeviceReset, which frees every allocation) uses the GPU again.
constexpr bool is_sticky_cuda_error(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

inline constexpr const char* kLostContextAdvice =
    "; the GPU context is lost for this process (a sticky CUDA error): restart twellscope to use the GPU "
    "again";

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  const auto kind = status == cudaErrorMemoryAllocation ? Error::Kind::OutOfMemory : Error::Kind::Device;
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  if (is_sticky_cuda_error(status)) message += kLostContextAdvice;
  throw Error(kind, message);
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                            int line) {
  const auto kind = status == CUBLAS_STATUS_ALLOC_FAILED ? Error::Kind::OutOfMemory : Error::Kind::Device;
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")";
  // cuBLAS reports a fault of earlier work as its own failure; name the CUDA error underneath.
  if (const cudaError_t underlying = cudaPeekAtLastError(); is_sticky_cuda_error(underlying))
    message += std::string(" after ") + cudaGetErrorName(underlying) + kLostContextAdvice;
  throw Error(kind, message);
}

}  // namespace twell::cuda

#define TWELL_CUDA_CHECK(call)                                                        \
  do {                                                                                \
    const cudaError_t twell_cuda_status_ = (call);                                    \
    if (twell_cuda_status_ != cudaSuccess)                                            \
      ::twell::cuda::throw_cuda_error(twell_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define TWELL_CUBLAS_CHECK(call)                                                          \
  do {                                                                                    \
    const cublasStatus_t twell_cublas_status_ = (call);                                   \
    if (twell_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::twell::cuda::throw_cublas_error(twell_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// After a kernel launch: reports launch-configuration errors (not asynchronous faults).
#define TWELL_CUDA_CHECK_LAUNCH(kernel_name)                                                               \
  do {                                                                                                     \
    const cudaError_t twell_launch_status_ = cudaGetLastError();                                           \
    if (twell_launch_status_ != cudaSuccess)                                                               \
      ::twell::cuda::throw_cuda_error(twell_launch_status_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
