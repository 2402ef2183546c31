// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell_dispatch_gate.hpp"

#include <mutex>
#include <vector>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"

namespace twell::cuda {
namespace {

// Writes 1 only in the sm_90a-specific compilation pass, the one the Hopper gate kernel's body
// is compiled in; any other pass (PTX JIT-compiled for a 9.0 device, sm_90 without "a") writes 0.
__global__ void sm90a_probe_kernel(int* answer) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *answer = 1;
#else
  *answer = 0;
#endif
}

bool probe_sm90a(int device) {
  int previous = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&previous));
  TWELL_CUDA_CHECK(cudaSetDevice(device));
  int* answer = nullptr;
  TWELL_CUDA_CHECK(cudaMalloc(&answer, sizeof(int)));
  int host = 0;
  sm90a_probe_kernel<<<1, 1>>>(answer);
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t copy =
      launch == cudaSuccess ? cudaMemcpy(&host, answer, sizeof(int), cudaMemcpyDeviceToHost) : launch;
  cudaFree(answer);
  TWELL_CUDA_CHECK(cudaSetDevice(previous));
  // No kernel image for the device at all: then no sm_90a code either.
  if (copy == cudaErrorNoKernelImageForDevice) return false;
  if (copy != cudaSuccess) throw_cuda_error(copy, "sm90a_probe_kernel", __FILE__, __LINE__);
  return host == 1;
}

// One thread per row; a warp claims its flagged rows' list slots with one atomic.
__global__ void compact_flagged_rows_kernel(const std::uint32_t* __restrict__ row_flags, int rows,
                                            std::uint32_t* __restrict__ counters,
                                            std::uint32_t* __restrict__ row_list) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const bool flagged = row < rows && row_flags[row] != 0u;
  const unsigned ballot = __ballot_sync(0xffffffffu, flagged);
  if (ballot == 0u) return;
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(ballot) - 1;
  std::uint32_t base = 0;
  if (lane == leader) base = atomicAdd(&counters[0], static_cast<std::uint32_t>(__popc(ballot)));
  base = __shfl_sync(ballot, base, leader);
  if (flagged) row_list[base + __popc(ballot & ((1u << lane) - 1u))] = static_cast<std::uint32_t>(row);
}

}  // namespace

bool binary_runs_sm90a_code(int device) {
  static std::mutex mutex;
  static std::vector<signed char> answers;  // per device: -1 unknown, 0 no, 1 yes
  if (!gate_pack_sm90_supported(device)) return false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<int>(answers.size()) <= device) answers.resize(device + 1, -1);
  if (answers[device] < 0) answers[device] = probe_sm90a(device) ? 1 : 0;
  return answers[device] == 1;
}

void launch_compact_flagged_rows(const std::uint32_t* row_flags, int rows, std::uint32_t* counters,
                                 std::uint32_t* row_list, cudaStream_t stream) {
  if (rows <= 0) return;
  constexpr int kThreads = 256;
  compact_flagged_rows_kernel<<<(rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(row_flags, rows,
                                                                                         counters, row_list);
  TWELL_CUDA_CHECK_LAUNCH("compact_flagged_rows_kernel");
}

}  // namespace twell::cuda
