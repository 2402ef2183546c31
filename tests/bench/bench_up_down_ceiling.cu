// SPDX-License-Identifier: GPL-3.0-or-later
// bench_up_down_ceiling: how close the TwELL up/down consumer runs to the memory floor of its access
// pattern. Every non-zero (token t, neuron j) needs the up row and the down row of j (2 x D bf16);
// with every neuron firing at the same rate, tokens share almost no rows, so those bytes come from
// L2 once per non-zero whatever the kernel does with them. Timed on the same packed rows: the
// consumer (default precision, gated), its split form (every h first, then the down rows) and its
// non-gated form (the down rows alone), the same row gather with no arithmetic (16-byte register
// loads, one CTA per token, as the consumer; with 2 and with 8 entries in flight per thread), and on
// sm_90 the gather through bulk copies into shared memory. D is 2048 (the gathers give each of 256
// threads one 16-byte chunk of a row). L2 flushed before every repetition, CUDA events, medians.
// JSON to --output or stdout.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "benchmark_output.hpp"
#include "flushed_median.cuh"
#include "test_support.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/version.hpp"

namespace {

using Bf16 = __nv_bfloat16;
using twell::cuda::DeviceBuffer;

constexpr int kTileWidth = 256;
constexpr int kThreads = 256;  // D / 8 for D 2048: one 16-byte chunk of every row per thread

__device__ std::uint32_t mix(std::uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ull;
  v ^= v >> 33;
  return static_cast<std::uint32_t>(v);
}

// TwELL rows in which neuron j of token t is live with probability threshold / 2^32, independently
// (the statistics of the controlled-density inputs), gate values in [0.1, 1.1).
__global__ void make_uniform_rows(std::uint32_t* packed, unsigned long long* live_total, int rows, int tiles,
                                  int slots, std::uint32_t threshold, int neurons) {
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (id >= static_cast<std::size_t>(rows) * tiles) return;
  const std::size_t row = id / tiles;
  const int tile = static_cast<int>(id % tiles);
  std::uint32_t* out = packed + row * tiles * slots + static_cast<std::size_t>(tile) * slots;
  std::uint32_t count = 0;
  for (int j = 0; j < kTileWidth; ++j) {
    const int neuron = tile * kTileWidth + j;
    if (neuron >= neurons) break;
    if (mix((row << 17) ^ static_cast<std::uint64_t>(neuron) ^ 0x9e3779b97f4a7c15ull) >= threshold) continue;
    if (count == static_cast<std::uint32_t>(slots - 1)) break;  // a full tile: the rest would overflow
    const float gate = 0.1f + static_cast<float>(mix(row * 7919u + neuron) >> 8) * (1.0f / 16777216.0f);
    out[1 + count++] = static_cast<std::uint32_t>(neuron) |
                       (static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16(gate))) << 16);
  }
  out[0] = count;
  for (int s = static_cast<int>(count) + 1; s < slots; ++s) out[s] = 0u;
  atomicAdd(live_total, static_cast<unsigned long long>(count));
}

__global__ void fill_uniform(Bf16* values, std::size_t count, std::uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    values[i] =
        __float2bfloat16((static_cast<float>(mix(i * 31 + seed) >> 8) * (1.0f / 16777216.0f) - 0.5f) * scale);
}

struct GatherParams {
  const std::uint32_t* packed;
  const Bf16* up;
  const Bf16* down_t;
  uint4* sink;  // one vector per thread, so the loads are not optimised away
  int hidden, tiles, slots;
};

// The consumer's loads and nothing else: per token, for every live entry, this thread's 16 bytes of
// the up row and of the down row, kEntries entries (2 kEntries loads) in flight at a time. The
// consumer keeps 4 loads in flight per thread; the deeper forms ask whether the gather is bound by
// the bytes in flight (Little's law) or by the L2's bandwidth.
template <int kEntries>
__global__ void __launch_bounds__(kThreads) gather_registers(const GatherParams p) {
  __shared__ std::uint32_t words[1024];
  __shared__ std::uint32_t list[1024];
  __shared__ int total;
  const std::size_t row = blockIdx.x;
  const int t = threadIdx.x;
  const int row_words = p.tiles * p.slots;
  for (int w = t; w < row_words; w += kThreads) words[w] = __ldcs(p.packed + row * row_words + w);
  __syncthreads();
  if (t < 32) {  // lane = tile (at most 32): an exclusive scan of the counts, then each lane's copy
    const std::uint32_t count = t < p.tiles ? words[t * p.slots] : 0u;
    std::uint32_t inclusive = count;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const std::uint32_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (t >= offset) inclusive += other;
    }
    for (std::uint32_t s = 0; s < count; ++s)
      list[inclusive - count + s] = words[t * p.slots + 1 + s] & 0xffffu;
    const int n = static_cast<int>(__shfl_sync(0xffffffffu, inclusive, 31));
    if (t == 0) total = n;
  }
  __syncthreads();
  const std::size_t column = static_cast<std::size_t>(t) * 8;
  uint4 fold = make_uint4(0, 0, 0, 0);
  for (int first = 0; first < total; first += kEntries) {
    uint4 rows[2 * kEntries];
#pragma unroll
    for (int i = 0; i < kEntries; ++i) {
      rows[2 * i] = rows[2 * i + 1] = uint4{};
      if (first + i < total) {
        const std::size_t j = list[first + i];
        rows[2 * i] = __ldg(reinterpret_cast<const uint4*>(p.up + j * p.hidden + column));
        rows[2 * i + 1] = __ldg(reinterpret_cast<const uint4*>(p.down_t + j * p.hidden + column));
      }
    }
#pragma unroll
    for (int i = 0; i < 2 * kEntries; ++i)
      fold.x ^= rows[i].x, fold.y ^= rows[i].y, fold.z ^= rows[i].z, fold.w ^= rows[i].w;
  }
  p.sink[row * kThreads + t] = fold;
}

// The same bytes through the copy engine (sm_90): one producer thread issues a bulk copy of each
// live entry's two rows into a 4-stage shared-memory ring, 256 consumer threads fold their chunks.
constexpr int kStages = 4;
__device__ __forceinline__ std::uint32_t shared_u32(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}
__global__ void __launch_bounds__(kThreads + 32) gather_bulk(const GatherParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 ring[];  // [kStages][2][D / 8]
  __shared__ std::uint32_t words[1024];
  __shared__ std::uint32_t list[1024];
  __shared__ int tile_offset[33];
  __shared__ __align__(8) unsigned long long full[kStages], empty[kStages];
  const std::size_t row = blockIdx.x;
  const int t = threadIdx.x;
  const int row_words = p.tiles * p.slots;
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_u32(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_u32(&empty[s])), "r"(kThreads));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int w = t; w < row_words; w += blockDim.x) words[w] = __ldcs(p.packed + row * row_words + w);
  __syncthreads();
  if (t == 0) {
    tile_offset[0] = 0;
    for (int tile = 0; tile < p.tiles; ++tile)
      tile_offset[tile + 1] = tile_offset[tile] + static_cast<int>(words[tile * p.slots]);
  }
  __syncthreads();
  for (int w = t; w < row_words; w += blockDim.x) {
    const int tile = w / p.slots, slot = w % p.slots;
    if (slot >= 1 && slot <= static_cast<int>(words[tile * p.slots]))
      list[tile_offset[tile] + slot - 1] = words[w] & 0xffffu;
  }
  __syncthreads();
  const int total = tile_offset[p.tiles];
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(p.hidden) * 2;
  const int chunks = p.hidden / 8;
  if (t == kThreads) {  // producer
    for (int e = 0; e < total; ++e) {
      const int s = e % kStages, round = e / kStages;
      if (round > 0) {
        asm volatile(
            "{\n .reg .pred done;\n wait: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done "
            "bra "
            "wait;\n}" ::"r"(shared_u32(&empty[s])),
            "r"((round - 1) & 1)
            : "memory");
      }
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_u32(&full[s])),
                   "r"(2 * row_bytes)
                   : "memory");
      const std::size_t neuron = list[e];
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              shared_u32(&ring[(2 * s) * chunks])),
          "l"(p.up + neuron * p.hidden), "r"(row_bytes), "r"(shared_u32(&full[s]))
          : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              shared_u32(&ring[(2 * s + 1) * chunks])),
          "l"(p.down_t + neuron * p.hidden), "r"(row_bytes), "r"(shared_u32(&full[s]))
          : "memory");
    }
    return;
  }
  if (t > kThreads) return;
  uint4 fold = make_uint4(0, 0, 0, 0);
  for (int e = 0; e < total; ++e) {
    const int s = e % kStages, round = e / kStages;
    asm volatile(
        "{\n .reg .pred done;\n wait: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra "
        "wait;\n}" ::"r"(shared_u32(&full[s])),
        "r"(round & 1)
        : "memory");
    const uint4 a = ring[(2 * s) * chunks + t], b = ring[(2 * s + 1) * chunks + t];
    fold.x ^= a.x ^ b.x, fold.y ^= a.y ^ b.y, fold.z ^= a.z ^ b.z, fold.w ^= a.w ^ b.w;
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_u32(&empty[s])) : "memory");
  }
  p.sink[row * kThreads + t] = fold;
#endif
}

// Outputs (bf16 bit patterns) where consumers `a` and `b`, both writing `out`, disagree.
std::size_t differing_outputs(const twell::cuda::UpDownArgs& a, const twell::cuda::UpDownArgs& b,
                              DeviceBuffer<Bf16>& out, cudaStream_t stream) {
  const auto run = [&](const twell::cuda::UpDownArgs& args) {
    TWELL_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, out.bytes(), stream));
    twell::cuda::launch_twell_up_down(args, stream);
    std::vector<std::uint16_t> bits(out.size());
    TWELL_CUDA_CHECK(cudaMemcpyAsync(bits.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost, stream));
    TWELL_CUDA_CHECK(cudaStreamSynchronize(stream));
    return bits;
  };
  const std::vector<std::uint16_t> first = run(a), second = run(b);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < first.size(); ++i) differing += first[i] != second[i] ? 1 : 0;
  return differing;
}

}  // namespace

int main(int argc, char** argv) try {
  int tokens = 131072, hidden = 2048, intermediate = 5632, warmup = 3, repetitions = 15;
  std::vector<double> densities_percent = {0.5, 2.0};
  std::string output;
  bool with_row_flags = false;
  CLI::App app{"The TwELL up/down consumer against the memory floor of its row gather"};
  app.add_option("--tokens", tokens, "tokens (M)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--densities", densities_percent, "live fraction of neurons per token, percent")
      ->delimiter(',')
      ->check(CLI::Range(0.001, 10.0));
  app.add_option("--intermediate", intermediate, "N (a packed row is staged whole: at most 8192)")
      ->check(CLI::Range(256, 8192));
  app.add_flag("--row-flags", with_row_flags,
               "pass the consumers a row-flag array (all clear), as FfnRunner does, instead of none");
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--repetitions", repetitions)->check(CLI::PositiveNumber);
  app.add_option("--output", output, "JSON file (written atomically); stdout when absent");
  CLI11_PARSE(app, argc, argv);
  const std::string command = twell::test::command_line(argc, argv);

  int device = 0, driver = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  TWELL_CUDA_CHECK(cudaDriverGetVersion(&driver));
  const std::string driver_version = twell::test::nvidia_driver_version();
  const bool bulk_copies = properties.major >= 9;

  const int tiles = (intermediate + kTileWidth - 1) / kTileWidth;
  constexpr int kCompression = 8, kSlots = kTileWidth / kCompression;
  DeviceBuffer<Bf16> x(static_cast<std::size_t>(tokens) * hidden),
      out(static_cast<std::size_t>(tokens) * hidden);
  DeviceBuffer<Bf16> up(static_cast<std::size_t>(intermediate) * hidden);
  DeviceBuffer<Bf16> down_t(static_cast<std::size_t>(intermediate) * hidden);
  DeviceBuffer<std::uint32_t> packed(static_cast<std::size_t>(tokens) * tiles * kSlots);
  DeviceBuffer<std::uint32_t> h_packed(static_cast<std::size_t>(tokens) * tiles * kSlots);
  DeviceBuffer<uint4> sink(static_cast<std::size_t>(tokens) * kThreads);
  DeviceBuffer<unsigned long long> live_total(1);
  DeviceBuffer<std::uint32_t> row_flags(static_cast<std::size_t>(tokens));
  TWELL_CUDA_CHECK(cudaMemset(row_flags.data(), 0, row_flags.bytes()));
  fill_uniform<<<4096, 256>>>(x.data(), x.size(), 1, 4.0f);
  fill_uniform<<<4096, 256>>>(up.data(), up.size(), 2, 0.07f);
  fill_uniform<<<4096, 256>>>(down_t.data(), down_t.size(), 3, 0.07f);
  TWELL_CUDA_CHECK_LAUNCH("fill_uniform");

  twell::cuda::Stream stream;
  twell::cuda::L2Flusher flusher;
  const int bulk_shared = kStages * 2 * hidden * 2;
  if (bulk_copies)
    TWELL_CUDA_CHECK(
        cudaFuncSetAttribute(gather_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_shared));
  const GatherParams gather{packed.data(), up.data(), down_t.data(), sink.data(), hidden, tiles, kSlots};
  twell::cuda::UpDownArgs consumer;
  consumer.x = x.data();
  consumer.packed = packed.data();
  consumer.up = up.data();
  consumer.down_t = down_t.data();
  consumer.out = out.data();
  consumer.rows = tokens;
  consumer.hidden = hidden;
  consumer.padded_neurons = tiles * kTileWidth;
  consumer.compression = kCompression;
  consumer.kernel = twell::cuda::UpDownKernel::PerTokenCta;
  if (with_row_flags) consumer.row_flags = row_flags.data();

  nlohmann::json results = nlohmann::json::array();
  std::cerr << "bench_up_down_ceiling on " << properties.name << ", M " << tokens << ", D " << hidden
            << ", N " << intermediate
            << "\n   dens%  live/token  consumer ms  gather ms  bulk ms  gather TB/s  consumer/gather\n";
  for (const double percent : densities_percent) {
    TWELL_CUDA_CHECK(cudaMemsetAsync(live_total.data(), 0, sizeof(unsigned long long), stream.get()));
    const auto threshold = static_cast<std::uint32_t>(std::min(percent / 100.0 * 4294967296.0, 4294967295.0));
    const std::size_t tiles_total = static_cast<std::size_t>(tokens) * tiles;
    make_uniform_rows<<<static_cast<unsigned>((tiles_total + 255) / 256), 256, 0, stream.get()>>>(
        packed.data(), live_total.data(), tokens, tiles, kSlots, threshold, intermediate);
    TWELL_CUDA_CHECK_LAUNCH("make_uniform_rows");
    unsigned long long live = 0;
    TWELL_CUDA_CHECK(
        cudaMemcpyAsync(&live, live_total.data(), sizeof live, cudaMemcpyDeviceToHost, stream.get()));
    TWELL_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

    const double consumer_ms =
        twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions,
                                       [&] { twell::cuda::launch_twell_up_down(consumer, stream.get()); });
    // The split form (UpDownArgs::h_packed): the same output bit for bit, checked before it is timed.
    twell::cuda::UpDownArgs split = consumer;
    split.h_packed = h_packed.data();
    const std::size_t differing = differing_outputs(consumer, split, out, stream.get());
    if (differing != 0) {
      std::cerr << "the split consumer differs from the fused one in " << differing << " outputs\n";
      return 1;
    }
    const double split_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
      twell::cuda::launch_twell_up_down(split, stream.get());
    });
    // The non-gated consumer on the same rows: the down rows alone (the split form's second kernel).
    twell::cuda::UpDownArgs down_only = consumer;
    down_only.x = nullptr;
    down_only.up = nullptr;
    const double down_only_ms =
        twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions,
                                       [&] { twell::cuda::launch_twell_up_down(down_only, stream.get()); });
    const double gather_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
      gather_registers<2><<<static_cast<unsigned>(tokens), kThreads, 0, stream.get()>>>(gather);
    });
    const double gather_deep_ms = twell::test::flushed_median_ms(
        flusher, stream.get(), warmup, repetitions,
        [&] { gather_registers<8><<<static_cast<unsigned>(tokens), kThreads, 0, stream.get()>>>(gather); });
    double bulk_ms = 0;
    if (bulk_copies)
      bulk_ms = twell::test::flushed_median_ms(flusher, stream.get(), warmup, repetitions, [&] {
        gather_bulk<<<static_cast<unsigned>(tokens), kThreads + 32, bulk_shared, stream.get()>>>(gather);
      });
    const double row_bytes = static_cast<double>(live) * 2.0 * hidden * 2.0;
    nlohmann::json row = {
        {"density_percent", percent},
        {"live_per_token", static_cast<double>(live) / tokens},
        {"weight_row_bytes", row_bytes},
        {"consumer_ms", consumer_ms},
        {"split_consumer_ms", split_ms},
        {"split_over_consumer", split_ms / consumer_ms},
        {"down_only_consumer_ms", down_only_ms},
        {"gather_registers_ms", gather_ms},
        {"gather_registers_tb_per_s", row_bytes / (gather_ms * 1e-3) / 1e12},
        {"consumer_over_gather", consumer_ms / gather_ms},
        {"gather_registers_8_entries_in_flight_ms", gather_deep_ms},
        {"gather_registers_8_entries_tb_per_s", row_bytes / (gather_deep_ms * 1e-3) / 1e12}};
    if (bulk_copies) row["gather_bulk_ms"] = bulk_ms;
    results.push_back(row);
    char line[200];
    std::snprintf(line, sizeof line, "  %6.2f %11.1f %12.3f %10.3f %8.3f %12.2f %16.2f\n", percent,
                  static_cast<double>(live) / tokens, consumer_ms, gather_ms, bulk_ms,
                  row_bytes / (gather_ms * 1e-3) / 1e12, consumer_ms / gather_ms);
    std::cerr << line;
    std::snprintf(line, sizeof line, "         split consumer %.3f ms (%.3fx), down rows alone %.3f ms\n",
                  split_ms, split_ms / consumer_ms, down_only_ms);
    std::cerr << line;
    std::snprintf(line, sizeof line, "         8 entries in flight per thread: %.3f ms, %.2f TB/s\n",
                  gather_deep_ms, row_bytes / (gather_deep_ms * 1e-3) / 1e12);
    std::cerr << line;
  }

  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const nlohmann::json document = {
      {"benchmark", "bench_up_down_ceiling"},
      {"date", date},
      {"gpu", properties.name},
      {"compute_capability", std::to_string(properties.major) + "." + std::to_string(properties.minor)},
      {"driver", driver_version.empty() ? "cuda " + std::to_string(driver) : driver_version},
      {"commit", twell::git_commit()},
      {"command", command},
      {"shape", {{"tokens", tokens}, {"hidden", hidden}, {"intermediate", intermediate}, {"compression", 8}}},
      {"inputs", "every neuron live with the same probability per token, independently; gates in [0.1, 1.1)"},
      {"row_flags", with_row_flags ? "an all-clear array, as FfnRunner passes" : "none"},
      {"timing", twell::test::flushed_median_timing(warmup, repetitions, flusher)},
      {"results", results}};
  twell::test::write_benchmark_json(document, output);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "bench_up_down_ceiling: " << error.what() << "\n";
  return 1;
}
