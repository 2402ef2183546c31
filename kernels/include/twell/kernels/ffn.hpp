// SPDX-License-Identifier: GPL-3.0-or-later
// The FFN operations on the GPU: the dense cuBLASLt path and the TwELL path, behind one runner
// that owns the workspaces and the cuBLASLt handle. Consumed by CudaBackend and the benchmark.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "twell/backend.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/tracer.hpp"

namespace twell::cuda {

/// One layer's FFN weights on the device, bf16. Gated: y = (act(x Wg^T) * (x Wu^T)) Wd^T.
/// Non-gated: y = ReLU(x Wu^T) Wd^T (gate is null).
struct FfnDeviceWeights {
  const __nv_bfloat16* gate = nullptr;    ///< [N, D] nn.Linear layout; null for non-gated
  const __nv_bfloat16* up = nullptr;      ///< [N, D]
  const __nv_bfloat16* down = nullptr;    ///< [D, N] nn.Linear layout (dense path)
  const __nv_bfloat16* down_t = nullptr;  ///< [N, D] = down^T contiguous (TwELL's consumer)
  int hidden = 0;                         ///< D, a multiple of 64, at most 8192
  int intermediate = 0;                   ///< N, at most 65536 (padded to 256 inside)
};

/// Which TwELL gate GEMM + pack kernel runs.
enum class GateKernel {
  Auto,       ///< CublasPack where it measured faster (gate_cublas_pack_preferred), else Sm90 where
              ///< available (see gate_kernel_sm90_available), else Portable
  Portable,   ///< mma.sync + cp.async, sm_80 and newer
  Sm90,       ///< TMA + mbarrier ring + warp-specialised persistent CTAs + wgmma (sm_90a build, CC 9.0)
  CublasPack  ///< cuBLASLt's GEMM into a dense [M, N] workspace, then a ReLU + pack pass (any GPU)
};
const char* to_string(GateKernel kernel) noexcept;  ///< "auto", "portable", "sm90", "cublas_pack"

/// True when the Hopper gate kernel can run on `device`: compute capability 9.0 and this binary
/// carries sm_90a machine code (probed once per device).
bool gate_kernel_sm90_available(int device);

/// What FfnRunner::twell does with the rows whose tiles overflowed capacity. Dense and Sparse run on
/// a high-priority side stream beside the consumer (which skips those rows), joined back before the
/// FFN returns; the host waits for the gate's counters to size them.
enum class OverflowRoute {
  Auto,      ///< Unbounded behind the cuBLAS gate and a CTA consumer where overflow_unbounded_preferred,
             ///< else Dense (the sparse route measured no faster: h100-sparse-overflow-and-bulk-2026-12-05)
  Dense,     ///< the dense FFN over those rows (cuBLASLt), reading all three weight matrices
  Sparse,    ///< their gate pre-activations (the cuBLAS gate's workspace, or cuBLASLt's gate GEMM over
             ///< just those rows after a fused gate) packed in the unbounded layout, where no tile
             ///< overflows, and consumed by the balanced consumer: up and down rows are read only where a
             ///< row is live. Up to kMaxSparseOverflowRows rows; more run Dense.
  Unbounded  ///< no row overflows: every row is packed in the unbounded layout from the cuBLAS gate's
             ///< pre-activations and one CTA consumer reads all its entries, so nothing is recomputed
             ///< and the host waits for nothing. Runs behind GateKernel::CublasPack only (Auto gate
             ///< takes it) and a CTA consumer; no split form. Rows over C's capacity are still counted.
};
const char* to_string(OverflowRoute route) noexcept;  ///< "auto", "dense", "sparse", "unbounded"

/// The most overflowing rows the sparse route takes in one call: its workspace is about 64 KiB a row
/// at D 2048, N 5632, and its time grows with every row's non-zeros, where the dense GEMMs over a
/// few hundred rows still cost about one read of the weights (on H100 it already lost at 45-96 rows).
constexpr int kMaxSparseOverflowRows = 256;

/// The kernels FfnRunner::twell uses; Auto picks the fastest measured one that applies.
struct TwellKernels {
  GateKernel gate = GateKernel::Auto;
  UpDownKernel up_down = UpDownKernel::Auto;
  OverflowRoute overflow = OverflowRoute::Auto;
};
/// The kernels core's request names (each part a to_string name above; "auto" is Auto).
TwellKernels twell_kernels_from_request(const TwellKernelRequest& request);
/// Why OverflowRoute::Unbounded cannot run with the requested gate and consumer (it needs the cuBLAS
/// gate and a CTA consumer, Auto resolving to them); empty where it can, or where it is not requested.
std::string unbounded_route_refusal(const TwellKernels& requested);

/// What FfnRunner's workspaces take, by group of buffers (bytes). The cuBLASLt workspace, allocated
/// with the runner, is not among them.
struct FfnWorkspaceBytes {
  std::uint64_t dense = 0;          ///< DenseFfn's gate and hidden [M, N], also the overflow recomputation's
  std::uint64_t packed = 0;         ///< the packed rows, the overflow state and the overflow row list
  std::uint64_t overflow_rows = 0;  ///< the gathered overflowing rows in and out, at worst every row
  std::uint64_t gate_output = 0;    ///< GateKernel::CublasPack's [M, N] pre-activations
  std::uint64_t balance = 0;        ///< the balanced consumer's plan and split tokens' partial outputs
  std::uint64_t sparse_route = 0;   ///< OverflowRoute::Sparse's pre-activations, packed rows, plan, partials
  std::uint64_t total() const noexcept;
};

/// One FFN call to plan the workspaces of.
struct FfnWorkspaceRequest {
  int tokens = 0;
  int hidden = 0;
  int intermediate = 0;
  std::uint32_t compression = 8;
  bool twell = true;     ///< false: the dense path only
  TwellKernels kernels;  ///< Auto resolved on `device` as FfnRunner::twell resolves it
};

/// The workspaces an FfnRunner call of `request` on `device` allocates, at most: CudaBackend plans a
/// forward with it before allocating anything, and the tests hold the runner's allocations to it.
FfnWorkspaceBytes ffn_workspace_bytes(const FfnWorkspaceRequest& request, int device);
/// Bytes a runner holding `held` allocates more to reach `planned` (its workspaces only grow).
std::uint64_t ffn_workspace_growth(const FfnWorkspaceBytes& held, const FfnWorkspaceBytes& planned) noexcept;

/// Runs FFNs on one stream. Not thread-safe; one per backend. Workspaces grow to the largest M seen.
class FfnRunner {
 public:
  explicit FfnRunner(cudaStream_t stream);
  ~FfnRunner();
  FfnRunner(const FfnRunner&) = delete;
  FfnRunner& operator=(const FfnRunner&) = delete;

  /// Dense: gate and up GEMMs (cuBLASLt), act(gate) * up fused, down GEMM. x and out are [M, D]
  /// bf16 row-major; out may not alias x. Launch groups are tagged gate_up / act_mul / down.
  /// If `gate_preactivation` is non-null it receives the gate GEMM output [M, N] bf16 (for statistics).
  void dense(const FfnDeviceWeights& weights, Activation activation, const __nv_bfloat16* x, int tokens,
             __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag,
             const __nv_bfloat16** gate_preactivation = nullptr);

  /// TwELL: gate GEMM with the ReLU + pack epilogue, then the fused up/down consumer; rows whose
  /// tiles overflowed capacity take the OverflowRoute of set_twell_kernels. Tagged gate_pack /
  /// up_down, then overflow_dense or overflow_sparse where a row overflowed.
  /// The activation is always ReLU (TwELL's packing predicate). Non-gated when weights.gate is null.
  /// Except under OverflowRoute::Unbounded, the host waits for the gate kernel (not for the
  /// consumer, which keeps the GPU busy meanwhile) to size the recomputation of overflowing rows, so
  /// a call cannot be stream-captured; the count is then known: last_overflow_rows().
  /// The gate's counters (overflowing rows, then tiles) go to the host from a side stream, into
  /// `counters_host` where given: two words of pinned (cudaMallocHost) memory, readable once this
  /// runner's stream has passed the call. last_overflow_rows() reads them there until the next call,
  /// so they must live until then. A forward keeps every layer's counts this way with nothing on its
  /// stream between the layers.
  void twell(const FfnDeviceWeights& weights, const FfnOptions& options, const __nv_bfloat16* x, int tokens,
             __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag, std::uint32_t* counters_host = nullptr);

  /// Selects the TwELL kernels of later twell() calls (default: Auto for both). Requesting Sm90 where
  /// it is unavailable makes twell() throw twell::Error (Kind::Unsupported).
  void set_twell_kernels(const TwellKernels& kernels);
  /// The kernels the last twell() call ran, Auto resolved (the overflow route: the one that ran, or
  /// where no row overflowed, the one that would have for a few rows).
  TwellKernels last_twell_kernels() const;
  /// Where later twell() calls run the CTA consumer in its split form (UpDownArgs::h_packed), always
  /// gated and in default precision: Auto (the default) where up_down_split_preferred measured it
  /// faster, Never, or Always. Never and Always are for benchmarks comparing the two forms; Always may
  /// allocate past ffn_workspace_bytes's plan, which follows Auto.
  enum class SplitConsumer { Auto, Never, Always };
  void set_split_consumer(SplitConsumer policy);
  /// Whether the last twell() call ran the split form.
  bool last_up_down_split() const;

  /// Rows of the last twell() call with a tile over C's capacity: recomputed apart, or under
  /// OverflowRoute::Unbounded consumed whole. The bounded routes read the count before twell()
  /// returned, so this does not synchronise there: a forward queues its next layer while the
  /// consumer still runs. After an Unbounded call it waits for the gate's counters.
  std::uint64_t last_overflow_rows() const;
  /// (row, tile) pairs of the last twell() call that had more non-zeros than capacity; empty when the
  /// gate kernel that ran only flags rows (the Hopper kernel clamps counts without counting tiles).
  /// Known when the row count is.
  std::optional<std::uint64_t> last_overflow_tiles() const;
  /// The rows last_overflow_rows() counts, ascending (synchronises; tests).
  std::vector<std::uint32_t> last_overflow_row_indices();

  /// The packed TwELL buffer of the last twell() call: [M, N_padded / C] uint32, or the unbounded
  /// layout after an OverflowRoute::Unbounded call (tests). Count words are clamped to capacity. Words past a
  /// tile's count are zero from the portable gate kernel and unspecified from the Hopper one (what its
  /// staging buffer held; TWELL_SPEC §2.1).
  const std::uint32_t* last_packed() const;

  cudaStream_t stream() const;
  /// The workspaces held now (they grow to the largest call seen; see ffn_workspace_bytes).
  FfnWorkspaceBytes workspace_bytes() const;

 private:
  void consume_overflow_sparsely(const FfnDeviceWeights& weights, const FfnOptions& options, GateKernel gate,
                                 cudaStream_t side);
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// The shape of one FFN layer call, for choose_ffn_path.
struct FfnShape {
  int tokens = 0;
  int hidden = 0;
  int intermediate = 0;
  std::uint32_t compression = 8;
  bool gated = true;
};

/// Where a break-even density comes from (core's type).
using FfnBreakEven = twell::FfnBreakEven;

/// The density above which the dense FFN beats TwELL (Auto kernels) for this shape on `device`:
/// from the table bench_ffn measured (same GPU model and compute capability, same D, N, C and
/// gating; the nearest measured token count), else the conservative default
/// (twell::conservative_break_even, ffn_dispatch.hpp).
FfnBreakEven twell_break_even(const FfnShape& shape, int device);

/// Per-layer dispatch: FfnPath::Twell when the layer's measured gate density (fraction of
/// activations > 0, e.g. from the profiler's previous pass) is below the break-even for this GPU
/// and shape, else FfnPath::Dense. The profiler still measures both paths; this only picks the one
/// a production forward would run.
FfnPath choose_ffn_path(double measured_density, const FfnShape& shape, int device);

/// The cluster size FfnRunner launches the sm_90a gate kernel with for `tokens` on a GPU model (its
/// cudaDeviceProp::name): what bench_gate_sm90 measured faster at the nearest token count measured
/// on that model (2: the weight tile multicast to pairs of CTAs); 1 on a model never measured.
int sm90_gate_cluster_size_for(const std::string& gpu_name, int tokens);
/// The same for `device`, its name read once.
int sm90_gate_cluster_size(int device, int tokens);

/// Whether Auto runs the gate as cuBLASLt's GEMM followed by the pack pass (GateKernel::CublasPack)
/// for `tokens` on a GPU model: where bench_ffn measured it faster than the sm_90a fused kernel, at
/// decode-sized token counts whose one row of 128-token tiles leaves most SMs idle. False on a model
/// never measured.
bool gate_cublas_pack_preferred_for(const std::string& gpu_name, int tokens);
/// The same for `device`, its name read once.
bool gate_cublas_pack_preferred(int device, int tokens);

/// Whether FfnRunner runs the CTA consumer in its split form (UpDownArgs::h_packed) for `tokens` on a
/// GPU model: where bench_up_down_ceiling and bench_ffn measured it faster than the fused kernel at the
/// nearest token count measured on that model. False on a model never measured.
bool up_down_split_preferred_for(const std::string& gpu_name, int tokens);
/// The same for `device`, its name read once.
bool up_down_split_preferred(int device, int tokens);

/// Whether OverflowRoute::Auto takes the unbounded route for `tokens` on a GPU model, where the gate
/// resolved to GateKernel::CublasPack and the consumer to a CTA kernel: where the forward end to end
/// measured it faster than the dense recomputation at the nearest token count measured on that model.
/// False on a model never measured.
bool overflow_unbounded_preferred_for(const std::string& gpu_name, int tokens);
/// The same for `device`, its name read once.
bool overflow_unbounded_preferred(int device, int tokens);

}  // namespace twell::cuda
