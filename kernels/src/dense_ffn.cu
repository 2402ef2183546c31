// SPDX-License-Identifier: GPL-3.0-or-later
// The dense FFN: cuBLASLt GEMMs (bf16 in, fp32 accumulation, bf16 out) and one vectorised
// elementwise kernel for act(gate) * up.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <map>
#include <string>
#include <tuple>

#include "twell/error.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/dense_ffn.hpp"
#include "twell/kernels/trace_op.hpp"

namespace twell::cuda {

// ---------------------------------------------------------------------------------------------
// LtMatmul

namespace {

// One cuBLASLt problem: its descriptors and the algorithm the heuristic chose, built once.
struct LtPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, out_layout = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (out_layout) cublasLtMatrixLayoutDestroy(out_layout);
    if (b_layout) cublasLtMatrixLayoutDestroy(b_layout);
    if (a_layout) cublasLtMatrixLayoutDestroy(a_layout);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

using PlanKey = std::tuple<int, int, int, int, int, bool>;
constexpr std::size_t kMaxPlans = 256;  // m, n, k, out pitch, epilogue, b is [K, N]

}  // namespace

struct LtMatmul::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> workspace;
  std::map<PlanKey, std::unique_ptr<LtPlan>> plans;

  ~Impl() {
    plans.clear();
    if (handle) cublasLtDestroy(handle);
  }

  LtPlan& plan(int m, int n, int k, int out_pitch, GemmEpilogue epilogue, bool b_is_k_by_n) {
    const PlanKey key{m, n, k, out_pitch, static_cast<int>(epilogue), b_is_k_by_n};
    if (auto found = plans.find(key); found != plans.end()) return *found->second;
    // Overflow recomputation brings a new M per call: keep the cache bounded.
    if (plans.size() >= kMaxPlans) plans.clear();

    // cuBLASLt is column-major. Read column-major, the row-major out [M, N] is out^T [N, M] =
    // W [N, K] x^T [K, M]: A is W stored as a K x N column-major matrix used transposed, B is x
    // stored as K x M column-major. A row-major b [K, N] is already N x K column-major: no transpose.
    auto made = std::make_unique<LtPlan>();
    TWELL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&made->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t a_operation = b_is_k_by_n ? CUBLAS_OP_N : CUBLAS_OP_T, keep = CUBLAS_OP_N;
    TWELL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(made->operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &a_operation, sizeof(a_operation)));
    TWELL_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(made->operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    const cublasLtEpilogue_t lt_epilogue =
        epilogue == GemmEpilogue::Relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
    TWELL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(made->operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                      &lt_epilogue, sizeof(lt_epilogue)));
    if (b_is_k_by_n) {
      TWELL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&made->a_layout, CUDA_R_16BF, n, k, n));
    } else {
      TWELL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&made->a_layout, CUDA_R_16BF, k, n, k));
    }
    TWELL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&made->b_layout, CUDA_R_16BF, k, m, k));
    TWELL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&made->out_layout, CUDA_R_16BF, n, m, out_pitch));

    cublasLtMatmulPreference_t preference = nullptr;
    TWELL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t workspace_bytes = workspace.bytes();
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
    if (status == CUBLAS_STATUS_SUCCESS)
      status =
          cublasLtMatmulAlgoGetHeuristic(handle, made->operation, made->a_layout, made->b_layout,
                                         made->out_layout, made->out_layout, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS)
      throw_cublas_error(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (found == 0)
      throw Error(Error::Kind::Unsupported,
                  "cuBLASLt has no bf16 algorithm for the GEMM m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k));
    made->algorithm = result.algo;
    return *plans.emplace(key, std::move(made)).first->second;
  }
};

LtMatmul::LtMatmul(std::size_t workspace_bytes) : m_impl(std::make_unique<Impl>()) {
  TWELL_CUBLAS_CHECK(cublasLtCreate(&m_impl->handle));
  m_impl->workspace.ensure(workspace_bytes);
}

LtMatmul::~LtMatmul() = default;

void LtMatmul::gemm_nt(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n,
                       int k, int out_pitch, GemmEpilogue epilogue, cudaStream_t stream) {
  run(a, b, out, m, n, k, out_pitch, epilogue, false, stream);
}

void LtMatmul::gemm_nn(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n,
                       int k, int out_pitch, GemmEpilogue epilogue, cudaStream_t stream) {
  run(a, b, out, m, n, k, out_pitch, epilogue, true, stream);
}

void LtMatmul::run(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, int m, int n, int k,
                   int out_pitch, GemmEpilogue epilogue, bool b_is_k_by_n, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0 || out_pitch < n)
    throw Error(Error::Kind::Internal, "LtMatmul: bad GEMM shape m=" + std::to_string(m) +
                                           " n=" + std::to_string(n) + " k=" + std::to_string(k));
  LtPlan& plan = m_impl->plan(m, n, k, out_pitch, epilogue, b_is_k_by_n);
  const float one = 1.0f, zero = 0.0f;
  TWELL_CUBLAS_CHECK(cublasLtMatmul(m_impl->handle, plan.operation, &one, b, plan.a_layout, a, plan.b_layout,
                                    &zero, out, plan.out_layout, out, plan.out_layout, &plan.algorithm,
                                    m_impl->workspace.data(), m_impl->workspace.bytes(), stream));
}

// ---------------------------------------------------------------------------------------------
// Elementwise kernels

namespace {

template <Activation kActivation>
__device__ __forceinline__ float activate(float value) {
  if constexpr (kActivation == Activation::Relu) {
    return fmaxf(value, 0.0f);
  } else {
    return value / (1.0f + __expf(-value));
  }
}

// 8 elements per thread per step (16-byte accesses); the scalar tail covers count % 8.
template <Activation kActivation>
__global__ void act_mul_kernel(const __nv_bfloat16* __restrict__ gate, __nv_bfloat16* __restrict__ up,
                               std::size_t count) {
  const std::size_t vectors = count / 8;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += stride) {
    const uint4 g = __ldcs(reinterpret_cast<const uint4*>(gate) + v);
    uint4 u = __ldcs(reinterpret_cast<const uint4*>(up) + v);
    const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&g);
    __nv_bfloat162* u2 = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 gf = __bfloat1622float2(g2[i]);
      const float2 uf = __bfloat1622float2(u2[i]);
      u2[i] = __floats2bfloat162_rn(activate<kActivation>(gf.x) * uf.x, activate<kActivation>(gf.y) * uf.y);
    }
    __stcs(reinterpret_cast<uint4*>(up) + v, u);
  }
  for (std::size_t i = vectors * 8 + blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride)
    up[i] = __float2bfloat16_rn(activate<kActivation>(__bfloat162float(gate[i])) * __bfloat162float(up[i]));
}

__global__ void relu_kernel(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out,
                            std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride)
    out[i] = __float2bfloat16_rn(fmaxf(__bfloat162float(in[i]), 0.0f));
}

unsigned elementwise_blocks(std::size_t work_items) {
  int device = 0, sms = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  TWELL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t wanted = (work_items + 255) / 256;
  const std::size_t cap = static_cast<std::size_t>(sms) * 8;  // grid-stride beyond 8 waves of 256 threads
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

}  // namespace

void launch_act_mul(Activation activation, const __nv_bfloat16* gate, __nv_bfloat16* up, std::size_t count,
                    cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = elementwise_blocks(count / 8 + 1);
  if (activation == Activation::Relu) {
    act_mul_kernel<Activation::Relu><<<blocks, 256, 0, stream>>>(gate, up, count);
  } else {
    act_mul_kernel<Activation::Silu><<<blocks, 256, 0, stream>>>(gate, up, count);
  }
  TWELL_CUDA_CHECK_LAUNCH("act_mul_kernel");
}

void launch_relu(const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t count, cudaStream_t stream) {
  if (count == 0) return;
  relu_kernel<<<elementwise_blocks(count), 256, 0, stream>>>(in, out, count);
  TWELL_CUDA_CHECK_LAUNCH("relu_kernel");
}

// ---------------------------------------------------------------------------------------------
// DenseFfn

void validate_ffn_weights(const FfnDeviceWeights& weights, bool for_twell) {
  const std::string where = for_twell ? "TwELL FFN: " : "dense FFN: ";
  if (weights.hidden <= 0 || weights.intermediate <= 0)
    throw Error(Error::Kind::InvalidInput, where + "hidden and intermediate sizes must be positive (got D=" +
                                               std::to_string(weights.hidden) +
                                               ", N=" + std::to_string(weights.intermediate) + ")");
  if (!weights.up) throw Error(Error::Kind::InvalidInput, where + "the up-projection weight is missing");
  if (for_twell) {
    if (!weights.down_t)
      throw Error(Error::Kind::InvalidInput,
                  where + "the transposed down weight (down_t, [N, D]) is missing");
    if (weights.hidden % 64 != 0 || weights.hidden > 8192)
      throw Error(Error::Kind::Unsupported, where + "hidden size " + std::to_string(weights.hidden) +
                                                " is not a multiple of 64 up to 8192");
    if (weights.intermediate > 65536)
      throw Error(Error::Kind::Unsupported, where + "intermediate size " +
                                                std::to_string(weights.intermediate) +
                                                " exceeds 65536 (16-bit column indices)");
  } else if (!weights.down && !weights.down_t) {
    throw Error(Error::Kind::InvalidInput,
                where + "the down weight (down [D, N] or down_t [N, D]) is missing");
  }
}

void DenseFfn::run(const FfnDeviceWeights& weights, Activation activation, const __nv_bfloat16* x, int tokens,
                   __nv_bfloat16* out, cudaStream_t stream, Tracer* tracer, const TraceTag& tag,
                   const __nv_bfloat16** gate_preactivation) {
  validate_ffn_weights(weights, false);
  if (tokens <= 0) throw Error(Error::Kind::InvalidInput, "dense FFN: token count must be positive");
  const int d = weights.hidden, n = weights.intermediate;
  const std::size_t elements = static_cast<std::size_t>(tokens) * n;
  m_hidden.ensure(elements);
  const bool gated = weights.gate != nullptr;
  const bool keep_preactivation = gate_preactivation != nullptr;
  if (gated || keep_preactivation) m_gate.ensure(elements);

  if (gated) {
    {
      ScopedTrace scope(tracer, with_op(tag, "gate_up"));
      m_matmul.gemm_nt(x, weights.gate, m_gate.data(), tokens, n, d, n, GemmEpilogue::None, stream);
      m_matmul.gemm_nt(x, weights.up, m_hidden.data(), tokens, n, d, n, GemmEpilogue::None, stream);
    }
    ScopedTrace scope(tracer, with_op(tag, "act_mul"));
    launch_act_mul(activation, m_gate.data(), m_hidden.data(), elements, stream);
  } else if (keep_preactivation) {  // non-gated, statistics wanted: keep x Wu^T before the ReLU
    {
      ScopedTrace scope(tracer, with_op(tag, "gate_up"));
      m_matmul.gemm_nt(x, weights.up, m_gate.data(), tokens, n, d, n, GemmEpilogue::None, stream);
    }
    ScopedTrace scope(tracer, with_op(tag, "act_mul"));
    launch_relu(m_gate.data(), m_hidden.data(), elements, stream);
  } else {  // non-gated: the ReLU rides in the GEMM's epilogue
    ScopedTrace scope(tracer, with_op(tag, "gate_up"));
    m_matmul.gemm_nt(x, weights.up, m_hidden.data(), tokens, n, d, n, GemmEpilogue::Relu, stream);
  }
  {
    ScopedTrace scope(tracer, with_op(tag, "down"));
    if (weights.down) {
      m_matmul.gemm_nt(m_hidden.data(), weights.down, out, tokens, d, n, d, GemmEpilogue::None, stream);
    } else {  // only the TwELL layout was given: h [M, N] x down_t [N, D]
      m_matmul.gemm_nn(m_hidden.data(), weights.down_t, out, tokens, d, n, d, GemmEpilogue::None, stream);
    }
  }
  if (gate_preactivation) *gate_preactivation = m_gate.data();
}

}  // namespace twell::cuda
