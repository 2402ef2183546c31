// SPDX-License-Identifier: GPL-3.0-or-later
// The Hopper (sm_90a) TwELL gate GEMM with its ReLU + pack epilogue: TMA, an mbarrier pipeline,
// warp-specialised persistent CTAs and wgmma m64n256k16. Same output as the portable gate kernel.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace twell::cuda {

struct GatePackSm90Params {
  const __nv_bfloat16* x = nullptr;       ///< [tokens, hidden] row-major, 16-byte aligned
  const __nv_bfloat16* weight = nullptr;  ///< [neurons, hidden] nn.Linear layout
  std::uint32_t* packed = nullptr;        ///< [tokens, round_up(neurons, 256) / compression]
  std::uint32_t* row_overflow = nullptr;  ///< [tokens]; set to 1 where a tile overflowed (caller zeroes)
  int tokens = 0;
  int hidden = 0;   ///< multiple of 64
  int neurons = 0;  ///< at most 65536
  int compression = 8;
  /// 1: plain persistent (the default); 2: the weight tile multicast to CTA pairs. FfnRunner picks
  /// per GPU model and token count from measurements (sm90_gate_cluster_size, ffn.hpp): 2 on the
  /// H100 80GB HBM3 (3-11 % faster) and on the H200 at M 16384 (1-3.5 %), 1 on the H200 at
  /// M 131072 (0.5 % faster).
  int cluster_size = 1;
  /// 0: one CTA per SM that can hold one (the default). Otherwise at most this many CTAs (rounded
  /// down to whole clusters, at least one), so that work on another stream keeps the other SMs.
  int max_ctas = 0;
};

/// How a call is launched (for benchmarks and the kernel registry).
struct GatePackSm90Plan {
  int ctas = 0;
  int cluster_size = 0;
  int shared_bytes = 0;
  int stages = 0;
};

/// True on a compute capability 9.0 device (the kernel is compiled for sm_90a only).
bool gate_pack_sm90_supported(int device);
/// Launches on `stream`. Throws twell::Error for unsupported shapes and failed CUDA calls.
void gate_pack_sm90(const GatePackSm90Params& params, cudaStream_t stream);
/// The launch gate_pack_sm90 would make, without launching.
GatePackSm90Plan gate_pack_sm90_plan(const GatePackSm90Params& params);

}  // namespace twell::cuda
