// SPDX-License-Identifier: GPL-3.0-or-later
// The attention projections through cuBLASLt: y = x W^T (+ y), bf16 in and out, fp32 accumulation.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "twell/kernels/device_buffer.hpp"

namespace twell::cuda {

class ProjectionGemm {
 public:
  ProjectionGemm();
  ~ProjectionGemm();
  ProjectionGemm(const ProjectionGemm&) = delete;
  ProjectionGemm& operator=(const ProjectionGemm&) = delete;

  /// y [tokens, out_features] = x [tokens, in_features] * w [out_features, in_features]^T, all row-major;
  /// with `accumulate`, y += instead (the residual add fused into the GEMM's epilogue).
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t tokens,
           int out_features, int in_features, bool accumulate, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t weight = nullptr, input = nullptr, output = nullptr;
    cublasLtMatmulAlgo_t algorithm{};
  };
  using Key = std::tuple<std::int64_t, int, int, bool>;
  const Plan& plan_for(const Key& key);

  cublasLtHandle_t m_handle = nullptr;
  DeviceBuffer<unsigned char> m_workspace;
  std::map<Key, Plan> m_plans;
};

}  // namespace twell::cuda
