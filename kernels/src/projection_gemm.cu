// SPDX-License-Identifier: GPL-3.0-or-later
#include "projection_gemm.hpp"

#include <string>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"

namespace twell::cuda {

namespace {
constexpr std::size_t kWorkspaceBytes = 32u << 20;  // what cuBLASLt's Hopper kernels like to have
}

ProjectionGemm::ProjectionGemm() {
  TWELL_CUBLAS_CHECK(cublasLtCreate(&m_handle));
  try {
    m_workspace.ensure(kWorkspaceBytes);
  } catch (...) {
    cublasLtDestroy(m_handle);
    throw;
  }
}

ProjectionGemm::~ProjectionGemm() {
  for (auto& [key, plan] : m_plans) {
    cublasLtMatrixLayoutDestroy(plan.weight);
    cublasLtMatrixLayoutDestroy(plan.input);
    cublasLtMatrixLayoutDestroy(plan.output);
    cublasLtMatmulDescDestroy(plan.operation);
  }
  cublasLtDestroy(m_handle);
}

const ProjectionGemm::Plan& ProjectionGemm::plan_for(const Key& key) {
  if (auto found = m_plans.find(key); found != m_plans.end()) return found->second;
  const auto [tokens, out_features, in_features, accumulate] = key;
  // Row-major y = x W^T is column-major y^T = W x^T: A = W (stored as [in, out] column-major,
  // transposed), B = x^T ([in, tokens] column-major), C = D = y^T ([out, tokens]).
  Plan plan;
  auto destroy = [&plan] {
    if (plan.weight) cublasLtMatrixLayoutDestroy(plan.weight);
    if (plan.input) cublasLtMatrixLayoutDestroy(plan.input);
    if (plan.output) cublasLtMatrixLayoutDestroy(plan.output);
    if (plan.operation) cublasLtMatmulDescDestroy(plan.operation);
  };
  try {
    TWELL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    const cublasOperation_t keep = CUBLAS_OP_N;
    TWELL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                      sizeof(transpose)));
    TWELL_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    TWELL_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.weight, CUDA_R_16BF, in_features, out_features, in_features));
    TWELL_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.input, CUDA_R_16BF, in_features, tokens, in_features));
    TWELL_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan.output, CUDA_R_16BF, out_features, tokens, out_features));

    cublasLtMatmulPreference_t preference = nullptr;
    TWELL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t workspace = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(m_handle, plan.operation, plan.weight, plan.input, plan.output,
                                              plan.output, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    TWELL_CUBLAS_CHECK(status);
    if (found == 0)
      throw Error(Error::Kind::Unsupported, "cuBLASLt has no bf16 algorithm for the projection " +
                                                std::to_string(tokens) + " x " + std::to_string(in_features) +
                                                " -> " + std::to_string(out_features) +
                                                (accumulate ? " (accumulating)" : ""));
    plan.algorithm = result.algo;
  } catch (...) {
    destroy();
    throw;
  }
  return m_plans.emplace(key, plan).first->second;
}

void ProjectionGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                         std::int64_t tokens, int out_features, int in_features, bool accumulate,
                         cudaStream_t stream) {
  if (tokens == 0) return;
  const Plan& plan = plan_for(Key{tokens, out_features, in_features, accumulate});
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  TWELL_CUBLAS_CHECK(cublasLtMatmul(m_handle, plan.operation, &alpha, w, plan.weight, x, plan.input, &beta, y,
                                    plan.output, y, plan.output, &plan.algorithm, m_workspace.data(),
                                    m_workspace.bytes(), stream));
}

}  // namespace twell::cuda
