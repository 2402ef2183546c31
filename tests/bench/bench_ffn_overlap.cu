// SPDX-License-Identifier: GPL-3.0-or-later
// bench_ffn_overlap: does running the TwELL gate GEMM of one chunk of tokens beside the up/down
// consumer of the previous chunk beat running them one after the other? The gate GEMM is bound by
// the card's power cap and the consumer by L2 throughput, so sharing the SMs between them could
// finish sooner than the sum. Contenders, all on the same inputs (gate fires at the given density;
// MODELS.md §4's bias channel), after an L2 flush, in the order --order names:
//   sequential      the gate GEMM over all M (one CTA per SM), then the consumer over all M;
//   chunks K, G     M cut into K chunks; the gate of chunk c on a high-priority stream with at most
//                   G CTAs, the consumer of chunk c on a low-priority stream once that gate is done.
// Every pipelined contender's output and packed rows must equal the sequential one's bit for bit
// (the kernels are the same per row; bench_ffn checks them against the CPU reference).
// Writes JSON (stdout, or --output FILE); a table goes to stderr.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "benchmark_output.hpp"
#include "controlled_density.hpp"
#include "device_fill.cuh"
#include "test_support.hpp"
#include "timing_order.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/l2_flush.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/kernels/twell_gate_pack_sm90.hpp"
#include "twell/kernels/twell_up_down.hpp"
#include "twell/timing_aggregate.hpp"
#include "twell/version.hpp"

namespace {

using Bf16 = __nv_bfloat16;
using twell::cuda::DeviceBuffer;
using twell::cuda::Event;

constexpr int kHidden = 2048, kNeurons = 5632, kCompression = 8, kTileM = 128, kTileWidth = 256;
constexpr int kWordsPerRow = kNeurons / kCompression;  // 5632 is a multiple of the 256-wide tile

struct Contender {
  std::string name;
  int chunks = 1;     ///< 0 for the sequential contender
  int gate_ctas = 0;  ///< 0: one per SM
  std::vector<double> samples_ms;
};

struct Buffers {
  DeviceBuffer<Bf16> x, gate, up, down_t, out;
  DeviceBuffer<std::uint32_t> packed, row_flags;
};

// Everything one FFN call runs, queued on `gate_stream` (and `consumer_stream` when pipelined);
// `consumer_stream` has joined `gate_stream` when this returns.
void run_ffn(const Contender& contender, Buffers& b, int tokens, cudaStream_t gate_stream,
             cudaStream_t consumer_stream, std::vector<Event>& chunk_done, Event& consumer_done) {
  TWELL_CUDA_CHECK(cudaMemsetAsync(b.row_flags.data(), 0,
                                   static_cast<std::size_t>(tokens) * sizeof(std::uint32_t), gate_stream));
  const int chunks = contender.chunks == 0 ? 1 : contender.chunks;
  const int tiles = tokens / kTileM;
  const cudaStream_t consume_on = contender.chunks == 0 ? gate_stream : consumer_stream;
  if (consume_on != gate_stream) {
    chunk_done[0].record(gate_stream);  // the memset above
    TWELL_CUDA_CHECK(cudaStreamWaitEvent(consume_on, chunk_done[0].get()));
  }
  for (int c = 0; c < chunks; ++c) {
    const int first = tiles * c / chunks * kTileM;
    const int rows = tiles * (c + 1) / chunks * kTileM - first;
    twell::cuda::GatePackSm90Params gate;
    gate.x = b.x.data() + static_cast<std::size_t>(first) * kHidden;
    gate.weight = b.gate.data();
    gate.packed = b.packed.data() + static_cast<std::size_t>(first) * kWordsPerRow;
    gate.row_overflow = b.row_flags.data() + first;
    gate.tokens = rows;
    gate.hidden = kHidden;
    gate.neurons = kNeurons;
    gate.compression = kCompression;
    gate.max_ctas = contender.gate_ctas;
    twell::cuda::gate_pack_sm90(gate, gate_stream);
    if (consume_on != gate_stream) {
      chunk_done[c].record(gate_stream);
      TWELL_CUDA_CHECK(cudaStreamWaitEvent(consume_on, chunk_done[c].get()));
    }
    twell::cuda::UpDownArgs consume;
    consume.x = gate.x;
    consume.packed = gate.packed;
    consume.up = b.up.data();
    consume.down_t = b.down_t.data();
    consume.row_flags = gate.row_overflow;
    consume.out = b.out.data() + static_cast<std::size_t>(first) * kHidden;
    consume.rows = rows;
    consume.hidden = kHidden;
    consume.padded_neurons = kNeurons;
    consume.compression = kCompression;
    consume.kernel = twell::cuda::UpDownKernel::PerTokenCta;
    twell::cuda::launch_twell_up_down(consume, consume_on);
  }
  if (consume_on != gate_stream) {
    consumer_done.record(consume_on);
    TWELL_CUDA_CHECK(cudaStreamWaitEvent(gate_stream, consumer_done.get()));
  }
}

// Packed rows agree: every tile's count and its live entries (the Hopper kernel leaves slots past
// the count as its staging buffer held them, which depends on the tile order).
bool same_live_entries(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  constexpr std::size_t kSlots = kTileWidth / kCompression;
  if (a.size() != b.size()) return false;
  for (std::size_t tile = 0; tile < a.size(); tile += kSlots) {
    if (a[tile] != b[tile] || a[tile] >= kSlots) return false;
    for (std::size_t slot = 1; slot <= a[tile]; ++slot)
      if (a[tile + slot] != b[tile + slot]) return false;
  }
  return true;
}

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& buffer) {
  std::vector<T> host(buffer.size());
  TWELL_CUDA_CHECK(cudaMemcpy(host.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

int main(int argc, char** argv) try {
  int tokens = 131072, warmup = 5, repetitions = 20;
  std::vector<double> densities_percent = {0.5, 1, 2};
  std::vector<int> chunk_counts = {4, 8};
  std::vector<int> gate_ctas = {0, 120, 108, 96};
  std::string output, order = "interleaved";
  CLI::App app{"The TwELL FFN with the gate of one chunk beside the consumer of the previous one"};
  app.add_option("--tokens", tokens, "tokens (M), a multiple of 128")->check(CLI::Range(128, 1 << 20));
  app.add_option("--densities", densities_percent, "gate densities, percent")
      ->delimiter(',')
      ->check(CLI::Range(0.01, 10.0));
  app.add_option("--chunks", chunk_counts, "chunk counts of the pipelined contenders")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--gate-ctas", gate_ctas, "CTA caps of the pipelined gate (0: one per SM)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1024));
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--repetitions", repetitions)->check(CLI::PositiveNumber);
  app.add_option("--output", output, "JSON file (written atomically); stdout when absent");
  twell::test::add_timing_order_option(app, order);
  CLI11_PARSE(app, argc, argv);
  if (tokens % kTileM != 0) {
    std::cerr << "bench_ffn_overlap: --tokens must be a multiple of " << kTileM << "\n";
    return 2;
  }
  const std::string command = twell::test::command_line(argc, argv);

  int device = 0;
  TWELL_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  if (!twell::cuda::gate_pack_sm90_supported(device)) {
    std::cerr << "bench_ffn_overlap: needs a compute capability 9.0 GPU (the sm_90a gate kernel)\n";
    return 3;
  }
  const std::size_t activations = static_cast<std::size_t>(tokens) * kHidden;
  const std::size_t weights = static_cast<std::size_t>(kNeurons) * kHidden;
  Buffers b{DeviceBuffer<Bf16>(activations),
            DeviceBuffer<Bf16>(weights),
            DeviceBuffer<Bf16>(weights),
            DeviceBuffer<Bf16>(weights),
            DeviceBuffer<Bf16>(activations),
            DeviceBuffer<std::uint32_t>(static_cast<std::size_t>(tokens) * kWordsPerRow),
            DeviceBuffer<std::uint32_t>(static_cast<std::size_t>(tokens))};
  // x[:, 0] = 1 and the other products sum to about N(0, 1), so a bias of Phi^-1(p) in the gate
  // weight's column 0 makes every neuron fire with probability p.
  const float row_scale = 1.0f / std::sqrt(static_cast<float>(kHidden - 1));
  twell::test::fill_gaussian_bf16(b.x.data(), activations, 1, 1.0f, kHidden, 1.0f);
  twell::test::fill_gaussian_bf16(b.up.data(), weights, 3, row_scale, kHidden, 0.0f);
  twell::test::fill_gaussian_bf16(b.down_t.data(), weights, 4, row_scale, kHidden, 0.0f);

  int least_priority = 0, greatest_priority = 0;
  TWELL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  cudaStream_t gate_stream = nullptr, consumer_stream = nullptr;
  TWELL_CUDA_CHECK(cudaStreamCreateWithPriority(&gate_stream, cudaStreamNonBlocking, greatest_priority));
  TWELL_CUDA_CHECK(cudaStreamCreateWithPriority(&consumer_stream, cudaStreamNonBlocking, least_priority));
  twell::cuda::L2Flusher flusher;
  int max_chunks = 1;
  for (const int k : chunk_counts) max_chunks = std::max(max_chunks, k);
  if (max_chunks > tokens / kTileM) {
    std::cerr << "bench_ffn_overlap: more chunks than 128-token tiles\n";
    return 2;
  }
  std::vector<Event> chunk_done;
  for (int c = 0; c < max_chunks; ++c) chunk_done.emplace_back(false);
  Event consumer_done(false), start, stop;

  std::vector<Contender> contenders{{"sequential", 0, 0, {}}};
  for (const int k : chunk_counts)
    for (const int ctas : gate_ctas)
      contenders.push_back({"chunks" + std::to_string(k) + "_ctas" + std::to_string(ctas), k, ctas, {}});

  nlohmann::json results = nlohmann::json::array();
  std::cerr << "bench_ffn_overlap on " << properties.name << ", M " << tokens << ", " << order << "\n";
  for (const double percent : densities_percent) {
    const float bias = static_cast<float>(twell::test::normal_quantile(percent / 100.0));
    twell::test::fill_gaussian_bf16(b.gate.data(), weights, 2, row_scale, kHidden, bias);
    TWELL_CUDA_CHECK_LAUNCH("fill_gaussian_bf16");
    // The fills and memsets run on the legacy stream, which the non-blocking FFN streams do not wait for.
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());

    // The reference run, then every pipelined contender, each from the same poisoned output.
    TWELL_CUDA_CHECK(cudaMemset(b.out.data(), 0x7f, b.out.bytes()));
    TWELL_CUDA_CHECK(cudaDeviceSynchronize());
    run_ffn(contenders[0], b, tokens, gate_stream, consumer_stream, chunk_done, consumer_done);
    TWELL_CUDA_CHECK(cudaStreamSynchronize(gate_stream));
    const std::vector<Bf16> reference_out = download(b.out);
    const std::vector<std::uint32_t> reference_packed = download(b.packed);
    const std::vector<std::uint32_t> flags = download(b.row_flags);
    std::size_t flagged = 0, live = 0;
    for (const std::uint32_t flag : flags) flagged += flag != 0;
    for (std::size_t i = 0; i < reference_packed.size(); i += kTileWidth / kCompression)
      live += reference_packed[i];
    for (std::size_t c = 1; c < contenders.size(); ++c) {
      TWELL_CUDA_CHECK(cudaMemset(b.out.data(), 0x7f, b.out.bytes()));
      TWELL_CUDA_CHECK(cudaDeviceSynchronize());
      run_ffn(contenders[c], b, tokens, gate_stream, consumer_stream, chunk_done, consumer_done);
      TWELL_CUDA_CHECK(cudaStreamSynchronize(gate_stream));
      const std::vector<Bf16> out = download(b.out);
      const std::vector<std::uint32_t> packed = download(b.packed);
      std::size_t rows_differing = 0;
      for (std::size_t row = 0; row < static_cast<std::size_t>(tokens); ++row)
        rows_differing += std::memcmp(out.data() + row * kHidden, reference_out.data() + row * kHidden,
                                      kHidden * sizeof(Bf16)) != 0;
      if (rows_differing != 0 || !same_live_entries(packed, reference_packed)) {
        std::cerr << "bench_ffn_overlap: " << contenders[c].name
                  << " does not reproduce the sequential run bit for bit (" << rows_differing
                  << " output rows differ; packed rows " << (packed == reference_packed ? "equal" : "differ")
                  << ")\n";
        return 4;
      }
    }

    for (Contender& contender : contenders) contender.samples_ms.clear();
    twell::test::run_in_order(order, warmup, repetitions, contenders.size(), [&](std::size_t c, bool keep) {
      flusher.flush(gate_stream);
      start.record(gate_stream);
      run_ffn(contenders[c], b, tokens, gate_stream, consumer_stream, chunk_done, consumer_done);
      TWELL_CUDA_CHECK_LAUNCH("FFN");
      stop.record(gate_stream);
      stop.synchronize();
      if (keep) contenders[c].samples_ms.push_back(stop.elapsed_ms_since(start));
    });

    const double sequential_ms = twell::timing::summarize(contenders[0].samples_ms).median_us;
    nlohmann::json row = {{"target_density_percent", percent},
                          {"density", static_cast<double>(live) / (static_cast<double>(tokens) * kNeurons)},
                          {"flagged_rows", flagged},
                          {"sequential_ms", sequential_ms}};
    char line[200];
    std::snprintf(line, sizeof line, "  %.2f %% (measured %.3f %%, %zu rows flagged): sequential %.3f ms\n",
                  percent, 100 * row["density"].get<double>(), flagged, sequential_ms);
    std::cerr << line;
    for (std::size_t c = 1; c < contenders.size(); ++c) {
      const double ms = twell::timing::summarize(contenders[c].samples_ms).median_us;
      const double paired =
          twell::timing::median_of_ratios(contenders[c].samples_ms, contenders[0].samples_ms);
      row[contenders[c].name] = {{"chunks", contenders[c].chunks},
                                 {"gate_ctas", contenders[c].gate_ctas},
                                 {"ms", ms},
                                 {"ratio_paired_to_sequential", paired}};
      std::snprintf(line, sizeof line, "    %-20s %8.3f ms  x%.4f paired\n", contenders[c].name.c_str(), ms,
                    paired);
      std::cerr << line;
    }
    results.push_back(row);
  }

  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const nlohmann::json document = {
      {"benchmark", "bench_ffn_overlap"},
      {"date", date},
      {"gpu", properties.name},
      {"sms", properties.multiProcessorCount},
      {"driver", twell::test::nvidia_driver_version()},
      {"commit", twell::git_commit()},
      {"command", command},
      {"shape",
       {{"tokens", tokens}, {"hidden", kHidden}, {"intermediate", kNeurons}, {"compression", kCompression}}},
      {"kernels",
       "sm_90a gate GEMM + pack (cluster 1), per-token-CTA up/down consumer; no dense recomputation "
       "of flagged rows (counted instead)"},
      {"timing",
       {{"warmup", warmup},
        {"repetitions", repetitions},
        {"statistic", "median"},
        {"order", order},
        {"clock",
         "cuda events around the whole call on the gate stream, after it joined the consumer stream"},
        {"l2_flush_bytes", flusher.bytes()}}},
      {"results", results}};
  twell::test::write_benchmark_json(document, output);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "bench_ffn_overlap: " << error.what() << "\n";
  return 1;
}
