// SPDX-License-Identifier: GPL-3.0-or-later
// FfnRunner: the dense and TwELL FFN paths on one stream, with their workspaces.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "twell/error.hpp"
#include "twell/kernels/dense_ffn.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/ffn.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/kernels/trace_op.hpp"
#include "twell/kernels/twell_gate_pack.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"
#include "twell/kernels/twell_overflow.hpp"
#include "twell/kernels/twell_pack_dense.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/kernels/twell_up_down_union.hpp"
#include "twell/twell_format.hpp"
#include "twell_dispatch_gate.hpp"

namespace twell::cuda {

struct FfnRunner::Impl {
  explicit Impl(cudaStream_t s) : stream(s) {}
  cudaStream_t stream;
  DenseFfn dense;
  DeviceBuffer<std::uint32_t> packed;                   ///< [M, N_padded / C]
  DeviceBuffer<std::uint32_t> h_packed;                 ///< packed's shape: the split consumer's h
  DeviceBuffer<std::uint32_t> union_workspace;          ///< the union consumer's unions and entries
  DeviceBuffer<__nv_bfloat16> gate_preactivations;      ///< [M, N]: GateKernel::CublasPack's GEMM output
  DeviceBuffer<std::uint32_t> balance_plan;             ///< the consumer's pieces balanced by non-zeros
  DeviceBuffer<float> balance_partials;                 ///< [slots, D]: split tokens' partial outputs
  DeviceBuffer<std::uint32_t> overflow_state;           ///< [2 + M]: row count, tile count, row flags
  DeviceBuffer<std::uint32_t> overflow_rows;            ///< [M]: the overflowing rows
  DeviceBuffer<__nv_bfloat16> tail_input, tail_output;  ///< [overflow rows, D]
  // The sparse overflow route's own workspace: it runs beside the main consumer.
  DeviceBuffer<__nv_bfloat16> tail_preactivations;  ///< [overflow rows, N] after a fused gate
  DeviceBuffer<std::uint32_t> tail_packed;          ///< [overflow rows, tiles * 512]: unbounded layout
  DeviceBuffer<std::uint32_t> tail_balance_plan;
  DeviceBuffer<float> tail_balance_partials;
  PinnedBuffer<std::uint32_t> own_counters_host{2};
  // Where the last call's counters went: own_counters_host, or the caller's pinned slot.
  std::uint32_t* counters_host = nullptr;
  Event counters_ready{false};
  // The dense recomputation of overflowing rows runs beside the consumer, which skips those rows:
  // on its own high-priority stream, from the gate's completion, joined back before the FFN returns.
  // Behind cuBLAS's gate GEMM the overflow state is cleared on the same stream, and after every gate
  // its counts are copied from it to the host, so the gate's and the consumer's kernels follow each
  // other on `stream` without a memset or copy between them.
  std::optional<Stream> overflow_stream;
  Event overflow_done{false};
  Event ffn_start{false}, state_cleared{false}, gate_done{false};
  cudaStream_t side_stream() {
    if (!overflow_stream) overflow_stream.emplace(highest_stream_priority());
    return overflow_stream->get();
  }
  std::uint64_t last_rows = 0, last_tiles = 0;
  // After an OverflowRoute::Unbounded call the counts are in flight to counters_host, read when asked.
  bool counts_pending = false;
  void read_pending_counts() {
    if (!counts_pending) return;
    counters_ready.synchronize();
    last_rows = counters_host[0];
    last_tiles = counters_host[1];
    counts_pending = false;
  }
  bool tiles_counted = true;
  FfnRunner::SplitConsumer split_policy = FfnRunner::SplitConsumer::Auto;
  bool last_split = false;
  TwellKernels requested, last_kernels;
};

namespace {

// Auto takes the Hopper kernel where it runs and its TMA maps can address the operands (16-byte
// aligned bases), except at the token counts where cuBLASLt's GEMM + the pack pass measured faster
// on this GPU model.
GateKernel resolve_gate_kernel(GateKernel requested, bool tma_addressable, int device, int tokens) {
  if (requested != GateKernel::Auto) return requested;
  if (!tma_addressable) return GateKernel::Portable;
  if (gate_cublas_pack_preferred(device, tokens)) return GateKernel::CublasPack;
  return gate_kernel_sm90_available(device) ? GateKernel::Sm90 : GateKernel::Portable;
}
GateKernel resolve_gate_kernel(GateKernel requested, const void* x, const void* weight, int tokens) {
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const bool aligned =
      reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(weight) % 16 == 0;
  return resolve_gate_kernel(requested, aligned, device, tokens);
}

// The route of the rows whose tiles overflowed, after the gate counted them. The sparse route tied or
// lost against the dense one in bench_ffn and end to end on H100, its consumer competing with the main
// one for SMs (h100-sparse-overflow-and-bulk-2026-12-05.json), so only a request takes it, for at most
// kMaxSparseOverflowRows rows. (The unbounded route is chosen before the gate: takes_unbounded_route.)
OverflowRoute resolve_overflow_route(OverflowRoute requested, std::uint64_t overflow_rows) {
  if (requested != OverflowRoute::Sparse) return OverflowRoute::Dense;
  return overflow_rows <= static_cast<std::uint64_t>(kMaxSparseOverflowRows) ? OverflowRoute::Sparse
                                                                             : OverflowRoute::Dense;
}

// The unbounded route packs the cuBLAS gate's pre-activations, so with it Auto means that gate.
GateKernel requested_gate_kernel(const TwellKernels& requested) {
  if (requested.overflow == OverflowRoute::Unbounded && requested.gate == GateKernel::Auto)
    return GateKernel::CublasPack;
  return requested.gate;
}

// Workspace sizes, shared by the allocations and by ffn_workspace_bytes's plan of them.
std::size_t packed_words(std::size_t rows, int padded, std::uint32_t compression) {
  return rows * (static_cast<std::size_t>(padded) / compression);
}
std::size_t unbounded_packed_words(std::size_t rows, int padded) {
  return rows * (static_cast<std::size_t>(padded) / kTwellTileWidth) * kTwellUnboundedSlots;
}
std::uint64_t balance_bytes(int rows, int hidden, int device) {
  const UpDownBalanceSizes balance = up_down_balance_sizes(rows, hidden, device);
  if (balance.extra_pieces == 0) return 0;
  return balance.plan_words * sizeof(std::uint32_t) + balance.partial_elements * sizeof(float);
}

// The consumers that launch one CTA per token or piece: only they read the unbounded layout and have a
// split form (UpDownArgs::h_packed, which also needs a gated call in default precision).
bool cta_consumer(UpDownKernel resolved) {
  return resolved == UpDownKernel::PerTokenCta || resolved == UpDownKernel::BalancedCta;
}

// Whether every row goes in the unbounded layout: where asked, or where Auto's gate and consumer are the
// ones it runs behind (the cuBLAS gate, a CTA consumer) and the forward measured it faster end to end.
bool takes_unbounded_route(OverflowRoute requested, GateKernel gate, UpDownKernel consumer, int device,
                           int tokens) {
  if (requested == OverflowRoute::Unbounded) return true;
  return requested == OverflowRoute::Auto && gate == GateKernel::CublasPack && cta_consumer(consumer) &&
         overflow_unbounded_preferred(device, tokens);
}

// Balanced-consumer workspace (null pointers where the launch runs one CTA per token).
void attach_balance_workspace(UpDownArgs& consume, int rows, int hidden, DeviceBuffer<std::uint32_t>& plan,
                              DeviceBuffer<float>& partials) {
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  const UpDownBalanceSizes balance = up_down_balance_sizes(rows, hidden, device);
  if (balance.extra_pieces == 0) return;
  plan.ensure(balance.plan_words);
  partials.ensure(balance.partial_elements);
  consume.balance_plan = plan.data();
  consume.balance_plan_words = plan.size();
  consume.balance_partials = partials.data();
  consume.balance_partial_elements = partials.size();
}

// The value of `Kind` whose to_string is `name`: core's vocabulary and the enums must agree.
template <typename Kind, std::size_t Count>
Kind kind_named(const std::string& name, const Kind (&kinds)[Count], const char* what) {
  for (Kind kind : kinds)
    if (name == to_string(kind)) return kind;
  throw Error(Error::Kind::Internal, std::string("TwELL kernels: no ") + what + " is named \"" + name + "\"");
}

}  // namespace

std::uint64_t FfnWorkspaceBytes::total() const noexcept {
  return dense + packed + overflow_rows + gate_output + balance + sparse_route;
}

FfnWorkspaceBytes ffn_workspace_bytes(const FfnWorkspaceRequest& request, int device) {
  FfnWorkspaceBytes bytes;
  if (request.tokens <= 0) return bytes;
  const std::uint64_t rows = static_cast<std::uint64_t>(request.tokens);
  const std::uint64_t neurons = static_cast<std::uint64_t>(request.intermediate);
  const std::uint64_t hidden = static_cast<std::uint64_t>(request.hidden);
  constexpr std::uint64_t kBf16 = sizeof(__nv_bfloat16), kWord = sizeof(std::uint32_t);
  bytes.dense = 2 * rows * neurons * kBf16;
  if (!request.twell) return bytes;
  const int padded = twell_padded_neurons(request.intermediate);
  // Planned for operands TMA can address, as CudaBackend's are (cudaMalloc'd).
  const GateKernel gate =
      resolve_gate_kernel(requested_gate_kernel(request.kernels), true, device, request.tokens);
  const UpDownKernel consumer = resolve_up_down_kernel(request.kernels.up_down, request.hidden);
  const bool unbounded =
      takes_unbounded_route(request.kernels.overflow, gate, consumer, device, request.tokens);
  const std::size_t packed_buffer_words =
      unbounded ? unbounded_packed_words(rows, padded)
                : packed_words(rows, padded, std::max<std::uint32_t>(request.compression, 2));
  bytes.packed = (packed_buffer_words + 2 + 2 * rows) * kWord;
  if (consumer == UpDownKernel::UnionSm90)
    bytes.packed +=
        union_workspace_words(request.tokens, padded, static_cast<int>(packed_buffer_words / rows)) * kWord;
  if (!unbounded) bytes.overflow_rows = 2 * rows * hidden * kBf16;
  if (gate == GateKernel::CublasPack) bytes.gate_output = rows * neurons * kBf16;
  if (consumer == UpDownKernel::BalancedCta)
    bytes.balance = balance_bytes(request.tokens, request.hidden, device);
  if (unbounded) return bytes;
  // The split consumer's h, packed's size (planned whether or not the call will be gated).
  if (cta_consumer(consumer) && up_down_split_preferred(device, request.tokens))
    bytes.packed += packed_words(rows, padded, std::max<std::uint32_t>(request.compression, 2)) * kWord;
  if (request.kernels.overflow == OverflowRoute::Sparse) {
    const int tail = std::min(request.tokens, kMaxSparseOverflowRows);
    // The pre-activations of the overflowing rows are counted even behind the cuBLAS gate, whose
    // workspace holds them: for operands TMA cannot address Auto runs a fused gate instead.
    bytes.sparse_route = unbounded_packed_words(static_cast<std::size_t>(tail), padded) * kWord +
                         balance_bytes(tail, request.hidden, device) +
                         static_cast<std::uint64_t>(tail) * neurons * kBf16;
  }
  return bytes;
}

std::uint64_t ffn_workspace_growth(const FfnWorkspaceBytes& held, const FfnWorkspaceBytes& planned) noexcept {
  const auto grows = [](std::uint64_t now, std::uint64_t then) { return then > now ? then - now : 0; };
  return grows(held.dense, planned.dense) + grows(held.packed, planned.packed) +
         grows(held.overflow_rows, planned.overflow_rows) + grows(held.gate_output, planned.gate_output) +
         grows(held.balance, planned.balance) + grows(held.sparse_route, planned.sparse_route);
}

FfnWorkspaceBytes FfnRunner::workspace_bytes() const {
  const Impl& impl = *m_impl;
  FfnWorkspaceBytes bytes;
  bytes.dense = impl.dense.workspace_bytes();
  bytes.packed = impl.packed.bytes() + impl.h_packed.bytes() + impl.union_workspace.bytes() +
                 impl.overflow_state.bytes() + impl.overflow_rows.bytes();
  bytes.overflow_rows = impl.tail_input.bytes() + impl.tail_output.bytes();
  bytes.gate_output = impl.gate_preactivations.bytes();
  bytes.balance = impl.balance_plan.bytes() + impl.balance_partials.bytes();
  bytes.sparse_route = impl.tail_preactivations.bytes() + impl.tail_packed.bytes() +
                       impl.tail_balance_plan.bytes() + impl.tail_balance_partials.bytes();
  return bytes;
}

const char* to_string(OverflowRoute route) noexcept {
  switch (route) {
    case OverflowRoute::Auto:
      return "auto";
    case OverflowRoute::Dense:
      return "dense";
    case OverflowRoute::Sparse:
      return "sparse";
    case OverflowRoute::Unbounded:
      return "unbounded";
  }
  return "unknown";
}

TwellKernels twell_kernels_from_request(const TwellKernelRequest& request) {
  constexpr GateKernel kGates[] = {GateKernel::Auto, GateKernel::Portable, GateKernel::Sm90,
                                   GateKernel::CublasPack};
  constexpr UpDownKernel kConsumers[] = {UpDownKernel::Auto, UpDownKernel::PerTokenCta,
                                         UpDownKernel::BalancedCta, UpDownKernel::PerTokenWarp,
                                         UpDownKernel::UnionSm90};
  constexpr OverflowRoute kRoutes[] = {OverflowRoute::Auto, OverflowRoute::Dense, OverflowRoute::Sparse,
                                       OverflowRoute::Unbounded};
  return {kind_named(request.gate, kGates, "gate kernel"),
          kind_named(request.up_down, kConsumers, "up/down kernel"),
          kind_named(request.overflow, kRoutes, "overflow route")};
}

std::string unbounded_route_refusal(const TwellKernels& requested) {
  if (requested.overflow != OverflowRoute::Unbounded) return {};
  if (requested.gate != GateKernel::Auto && requested.gate != GateKernel::CublasPack)
    return std::string(
               "the unbounded overflow route packs the cuBLAS gate's pre-activations, so its gate is "
               "cublas_pack or auto, not ") +
           to_string(requested.gate);
  if (requested.up_down == UpDownKernel::PerTokenWarp)
    return "the unbounded overflow route needs a CTA consumer (per_token_cta, balanced_cta or auto); the "
           "one-warp-per-token kernel does not read the unbounded layout";
  return {};
}

const char* to_string(GateKernel kernel) noexcept {
  switch (kernel) {
    case GateKernel::Auto:
      return "auto";
    case GateKernel::Portable:
      return "portable";
    case GateKernel::Sm90:
      return "sm90";
    case GateKernel::CublasPack:
      return "cublas_pack";
  }
  return "unknown";
}

bool gate_kernel_sm90_available(int device) {
  return binary_runs_sm90a_code(device);
}

FfnRunner::FfnRunner(cudaStream_t stream) : m_impl(std::make_unique<Impl>(stream)) {}
FfnRunner::~FfnRunner() = default;

cudaStream_t FfnRunner::stream() const {
  return m_impl->stream;
}

void FfnRunner::dense(const FfnDeviceWeights& weights, Activation activation, const __nv_bfloat16* x,
                      int tokens, __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag,
                      const __nv_bfloat16** gate_preactivation) {
  m_impl->dense.run(weights, activation, x, tokens, out, m_impl->stream, tracer, tag, gate_preactivation);
}

void FfnRunner::twell(const FfnDeviceWeights& weights, const FfnOptions& options, const __nv_bfloat16* x,
                      int tokens, __nv_bfloat16* out, Tracer* tracer, const TraceTag& tag,
                      std::uint32_t* counters_host) {
  validate_ffn_weights(weights, true);
  if (tokens <= 0) throw Error(Error::Kind::InvalidInput, "TwELL FFN: token count must be positive");
  const std::uint32_t compression = options.compression;
  if (compression != 8 && compression != 4 && compression != 2)
    throw Error(Error::Kind::Unsupported,
                "TwELL FFN: compression factor " + std::to_string(compression) + " is not 8, 4 or 2");
  Impl& impl = *m_impl;
  const cudaStream_t stream = impl.stream;
  const bool gated = weights.gate != nullptr;
  const int padded = twell_padded_neurons(weights.intermediate);
  const std::size_t rows = static_cast<std::size_t>(tokens);
  if (const std::string refusal = unbounded_route_refusal(impl.requested); !refusal.empty())
    throw Error(Error::Kind::Unsupported, "TwELL FFN: " + refusal);
  const GateKernel gate = resolve_gate_kernel(requested_gate_kernel(impl.requested), x,
                                              gated ? weights.gate : weights.up, tokens);
  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  int gate_cluster_size = 1;
  if (gate == GateKernel::Sm90) {
    if (!gate_kernel_sm90_available(device))
      throw Error(Error::Kind::Unsupported,
                  "TwELL FFN: the sm_90a gate kernel was requested but this device or build cannot run it");
    gate_cluster_size = sm90_gate_cluster_size(device, tokens);
  }
  const UpDownKernel up_down = resolve_up_down_kernel(impl.requested.up_down, weights.hidden);
  if (up_down == UpDownKernel::PerTokenWarp && !up_down_per_token_warp_supported(weights.hidden))
    throw Error(Error::Kind::Unsupported,
                "TwELL FFN: the one-warp-per-token up/down kernel needs hidden <= 2048 (got " +
                    std::to_string(weights.hidden) + ")");
  if (up_down == UpDownKernel::UnionSm90) {
    if (!up_down_union_available(device))
      throw Error(Error::Kind::Unsupported,
                  "TwELL FFN: the union consumer needs an sm_90a build on a compute capability 9.0 device");
    if (options.highest_precision || weights.hidden % 256 != 0 || padded > 16384)
      throw Error(Error::Kind::Unsupported,
                  "TwELL FFN: the union consumer runs in default precision, with a hidden size that is a "
                  "multiple of 256 and at most 16384 padded neurons");
  }
  const bool unbounded = takes_unbounded_route(impl.requested.overflow, gate, up_down, device, tokens);
  const std::size_t packed_buffer_words =
      unbounded ? unbounded_packed_words(rows, padded) : packed_words(rows, padded, compression);
  impl.packed.ensure(packed_buffer_words);
  if (up_down == UpDownKernel::UnionSm90)
    impl.union_workspace.ensure(
        union_workspace_words(tokens, padded, static_cast<int>(packed_buffer_words / rows)));
  impl.overflow_state.ensure(2 + rows);
  impl.overflow_rows.ensure(rows);
  std::uint32_t* row_flags = impl.overflow_state.data() + 2;
  impl.last_kernels = {
      gate, up_down,
      unbounded ? OverflowRoute::Unbounded : resolve_overflow_route(impl.requested.overflow, 1)};
  impl.counts_pending = false;
  impl.last_split = !unbounded && gated && !options.highest_precision &&
                    impl.split_policy != SplitConsumer::Never && cta_consumer(up_down) &&
                    (impl.split_policy == SplitConsumer::Always || up_down_split_preferred(device, tokens));
  if (impl.last_split) impl.h_packed.ensure(packed_words(rows, padded, compression));
  impl.tiles_counted = gate != GateKernel::Sm90;

  {
    ScopedTrace scope(tracer, with_op(tag, "gate_pack"));
    const cudaStream_t side = impl.side_stream();
    const std::size_t state_bytes = (2 + rows) * sizeof(std::uint32_t);
    // Behind cuBLAS's GEMM the state is cleared on the side stream while the GEMM runs (after
    // everything before this call, its last reader included), and the pack waits for it; the fused
    // gates write it first, so it is cleared in line.
    if (gate == GateKernel::CublasPack) {
      impl.ffn_start.record(stream);
      TWELL_CUDA_CHECK(cudaStreamWaitEvent(side, impl.ffn_start.get(), 0));
      TWELL_CUDA_CHECK(cudaMemsetAsync(impl.overflow_state.data(), 0, state_bytes, side));
      impl.state_cleared.record(side);
    } else {
      TWELL_CUDA_CHECK(cudaMemsetAsync(impl.overflow_state.data(), 0, state_bytes, stream));
    }
    const __nv_bfloat16* weight = gated ? weights.gate : weights.up;
    if (gate == GateKernel::Sm90) {
      GatePackSm90Params pack;
      pack.x = x;
      pack.weight = weight;
      pack.packed = impl.packed.data();
      pack.row_overflow = row_flags;
      pack.tokens = tokens;
      pack.hidden = weights.hidden;
      pack.neurons = weights.intermediate;
      pack.compression = static_cast<int>(compression);
      pack.cluster_size = gate_cluster_size;
      gate_pack_sm90(pack, stream);
      // The Hopper kernel flags rows; the dense recomputation wants their count and list.
      launch_compact_flagged_rows(row_flags, tokens, impl.overflow_state.data(), impl.overflow_rows.data(),
                                  stream);
    } else if (gate == GateKernel::CublasPack) {
      const int neurons = weights.intermediate;
      impl.gate_preactivations.ensure(rows * neurons);
      impl.dense.matmul().gemm_nt(x, weight, impl.gate_preactivations.data(), tokens, neurons, weights.hidden,
                                  neurons, GemmEpilogue::None, stream);
      TWELL_CUDA_CHECK(cudaStreamWaitEvent(stream, impl.state_cleared.get(), 0));
      PackDenseArgs pack;
      pack.preactivations = impl.gate_preactivations.data();
      pack.rows = tokens;
      pack.neurons = neurons;
      pack.pitch = neurons;
      pack.compression = unbounded ? kTwellUnbounded : compression;
      pack.counted_compression = unbounded ? compression : 0;
      pack.packed = impl.packed.data();
      pack.overflow = {impl.overflow_state.data(), row_flags, impl.overflow_rows.data()};
      launch_twell_pack_dense(pack, stream);
    } else {
      GatePackArgs pack;
      pack.x = x;
      pack.weight = weight;
      pack.rows = tokens;
      pack.hidden = weights.hidden;
      pack.neurons = weights.intermediate;
      pack.compression = compression;
      pack.packed = impl.packed.data();
      pack.overflow = {impl.overflow_state.data(), row_flags, impl.overflow_rows.data()};
      launch_twell_gate_pack(pack, stream);
    }
    // The counts go to the host from the side stream: the consumer's kernels follow the gate's.
    impl.gate_done.record(stream);
    TWELL_CUDA_CHECK(cudaStreamWaitEvent(side, impl.gate_done.get(), 0));
    impl.counters_host = counters_host != nullptr ? counters_host : impl.own_counters_host.data();
    TWELL_CUDA_CHECK(cudaMemcpyAsync(impl.counters_host, impl.overflow_state.data(),
                                     2 * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, side));
    impl.counters_ready.record(side);
  }
  {
    ScopedTrace scope(tracer, with_op(tag, "up_down"));
    UpDownArgs consume;
    consume.x = x;
    consume.packed = impl.packed.data();
    consume.up = gated ? weights.up : nullptr;
    consume.down_t = weights.down_t;
    consume.row_flags = unbounded ? nullptr : row_flags;  // unbounded: every row is the consumer's
    consume.out = out;
    consume.rows = tokens;
    consume.hidden = weights.hidden;
    consume.padded_neurons = padded;
    consume.compression = unbounded ? kTwellUnbounded : compression;
    consume.highest_precision = options.highest_precision;
    consume.kernel = up_down;
    if (up_down == UpDownKernel::BalancedCta)
      attach_balance_workspace(consume, tokens, weights.hidden, impl.balance_plan, impl.balance_partials);
    if (impl.last_split) consume.h_packed = impl.h_packed.data();
    if (up_down == UpDownKernel::UnionSm90) {
      consume.union_workspace = impl.union_workspace.data();
      consume.union_workspace_words = impl.union_workspace.size();
    }
    launch_twell_up_down(consume, stream);
    // Whatever follows on the stream (the next call's clearing of the state among it) comes after the
    // copy, which finished long before the consumer.
    TWELL_CUDA_CHECK(cudaStreamWaitEvent(stream, impl.counters_ready.get(), 0));
  }

  // The consumer is queued behind the gate kernel; waiting for the counters only costs host time,
  // and the unbounded route, with nothing to recompute, does not wait at all.
  impl.counts_pending = true;
  if (unbounded) return;
  impl.read_pending_counts();
  if (impl.last_rows == 0) return;

  const OverflowRoute route = resolve_overflow_route(impl.requested.overflow, impl.last_rows);
  impl.last_kernels.overflow = route;
  ScopedTrace scope(tracer,
                    with_op(tag, route == OverflowRoute::Sparse ? "overflow_sparse" : "overflow_dense"));
  const int overflow = static_cast<int>(impl.last_rows);
  const std::size_t tail_elements = impl.last_rows * static_cast<std::size_t>(weights.hidden);
  impl.tail_input.ensure(tail_elements);
  impl.tail_output.ensure(tail_elements);
  const cudaStream_t side = impl.side_stream();  // where the counters were copied, in order after it
  launch_gather_rows(x, impl.overflow_rows.data(), overflow, weights.hidden, impl.tail_input.data(), side);
  if (route == OverflowRoute::Sparse) {
    consume_overflow_sparsely(weights, options, gate, side);
  } else {
    impl.dense.run(weights, Activation::Relu, impl.tail_input.data(), overflow, impl.tail_output.data(), side,
                   nullptr, tag);
  }
  launch_scatter_rows(impl.tail_output.data(), impl.overflow_rows.data(), overflow, weights.hidden, out,
                      side);
  impl.overflow_done.record(side);
  TWELL_CUDA_CHECK(cudaStreamWaitEvent(stream, impl.overflow_done.get(), 0));
}

// The gathered overflowing rows (tail_input) to tail_output without a dense pass: their gate
// pre-activations, from the cuBLAS gate's [M, N] workspace where that gate ran and else from a
// cuBLASLt GEMM over just these rows (the fused gates keep none), packed in the unbounded layout and
// consumed by the balanced consumer. Only the up and down rows of live neurons are read.
void FfnRunner::consume_overflow_sparsely(const FfnDeviceWeights& weights, const FfnOptions& options,
                                          GateKernel gate, cudaStream_t side) {
  Impl& impl = *m_impl;
  const int overflow = static_cast<int>(impl.last_rows);
  const int neurons = weights.intermediate;
  const int padded = twell_padded_neurons(neurons);
  impl.tail_packed.ensure(unbounded_packed_words(impl.last_rows, padded));

  PackDenseArgs pack;
  pack.rows = overflow;
  pack.neurons = neurons;
  pack.pitch = neurons;
  pack.compression = kTwellUnbounded;
  pack.packed = impl.tail_packed.data();
  if (gate == GateKernel::CublasPack) {
    pack.preactivations = impl.gate_preactivations.data();
    pack.source_rows = impl.overflow_rows.data();
  } else {
    impl.tail_preactivations.ensure(impl.last_rows * static_cast<std::size_t>(neurons));
    const __nv_bfloat16* weight = weights.gate != nullptr ? weights.gate : weights.up;
    impl.dense.matmul().gemm_nt(impl.tail_input.data(), weight, impl.tail_preactivations.data(), overflow,
                                neurons, weights.hidden, neurons, GemmEpilogue::None, side);
    pack.preactivations = impl.tail_preactivations.data();
  }
  launch_twell_pack_dense(pack, side);

  UpDownArgs consume;
  consume.x = impl.tail_input.data();
  consume.packed = impl.tail_packed.data();
  consume.up = weights.gate != nullptr ? weights.up : nullptr;
  consume.down_t = weights.down_t;
  consume.out = impl.tail_output.data();
  consume.rows = overflow;
  consume.hidden = weights.hidden;
  consume.padded_neurons = padded;
  consume.compression = kTwellUnbounded;
  consume.highest_precision = options.highest_precision;
  consume.kernel = UpDownKernel::BalancedCta;
  attach_balance_workspace(consume, overflow, weights.hidden, impl.tail_balance_plan,
                           impl.tail_balance_partials);
  launch_twell_up_down(consume, side);
}

std::uint64_t FfnRunner::last_overflow_rows() const {
  m_impl->read_pending_counts();
  return m_impl->last_rows;
}

std::optional<std::uint64_t> FfnRunner::last_overflow_tiles() const {
  if (!m_impl->tiles_counted) return std::nullopt;
  m_impl->read_pending_counts();
  return m_impl->last_tiles;
}

void FfnRunner::set_twell_kernels(const TwellKernels& kernels) {
  m_impl->requested = kernels;
}

TwellKernels FfnRunner::last_twell_kernels() const {
  return m_impl->last_kernels;
}

void FfnRunner::set_split_consumer(SplitConsumer policy) {
  m_impl->split_policy = policy;
}

bool FfnRunner::last_up_down_split() const {
  return m_impl->last_split;
}

std::vector<std::uint32_t> FfnRunner::last_overflow_row_indices() {
  std::vector<std::uint32_t> rows(last_overflow_rows());
  if (!rows.empty()) {
    m_impl->overflow_rows.copy_to_host(rows.data(), rows.size(), m_impl->stream);
  }
  TWELL_CUDA_CHECK(cudaStreamSynchronize(m_impl->stream));
  std::sort(rows.begin(), rows.end());
  return rows;
}

const std::uint32_t* FfnRunner::last_packed() const {
  return m_impl->packed.data();
}

}  // namespace twell::cuda
