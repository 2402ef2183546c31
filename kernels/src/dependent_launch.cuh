// SPDX-License-Identifier: GPL-3.0-or-later
// Programmatic dependent launch (sm_90 and later): a kernel launched with it is scheduled while the
// kernel before it in the stream is still running, so the gap between two short kernels (their
// launch and the first CTAs reaching the SMs) overlaps the first one's tail. At decode-sized M the
// plan and the consumer after it are a few microseconds each, where that gap is a large part.
// A kernel launched this way calls wait_for_prior_grid() before it reads anything the kernel before
// it wrote; the wait returns once that kernel has finished and its writes are visible. The kernel
// before it may call allow_dependent_launch() to let the next one be scheduled before it finishes.
// Both are no-ops below sm_90 and when the kernel was launched the ordinary way.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "twell/kernels/cuda_check.hpp"

namespace twell::cuda {

__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Whether the current device takes programmatic dependent launches (compute capability 9.0 and up).
inline bool dependent_launch_supported() {
  int device = 0, major = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

/// Launches `kernel` on `stream`, overlapping the kernel before it where `overlap` is set (the kernel
/// must then call wait_for_prior_grid() before its first dependent read). `name` names it in errors.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, bool overlap,
                      const char* name, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = overlap ? &attribute : nullptr;
  config.numAttrs = overlap ? 1u : 0u;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess)
    throw_cuda_error(status, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
}

}  // namespace twell::cuda
