// SPDX-License-Identifier: GPL-3.0-or-later
// Checked CUDA / cuBLAS calls: every failure becomes a twell::Error naming the call, the file and
// the line, with Kind::OutOfMemory for allocation failures and Kind::Device otherwise.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "twell/error.hpp"

namespace twell::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  const auto kind = status == cudaErrorMemoryAllocation ? Error::Kind::OutOfMemory : Error::Kind::Device;
  throw Error(kind, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                            int line) {
  const auto kind = status == CUBLAS_STATUS_ALLOC_FAILED ? Error::Kind::OutOfMemory : Error::Kind::Device;
  throw Error(kind, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
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
