// SPDX-License-Identifier: GPL-3.0-or-later
// bench_end_to_end: the whole backbone (embedding, every decoder layer, final norm; no LM head)
// with dense FFNs, with TwELL FFNs, and (unless --no-statistics) with each layer on the path the
// per-layer dispatch picks for its measured density, by the paper's protocol (TWELL_SPEC.md §5.1): seeded
// random token ids, 64 x 2048 tokens by default, warm-up forwards, then timed repetitions (host clock around
// each forward, which ends with a stream synchronisation). Reports tokens/ms per path and the TwELL / dense
// ratio, a per-op time breakdown from one CUDA-event-traced forward per path, the measured FFN density of the
// checkpoint on these tokens, and attention timed on its own. JSON goes to stdout (or --output FILE); a
// summary goes to stderr.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "benchmark_output.hpp"
#include "twell/checkpoint.hpp"
#include "twell/cupti/tracers.hpp"
#include "twell/error.hpp"
#include "twell/kernels/cuda_backend.hpp"
#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/device_buffer.hpp"
#include "twell/kernels/stream.hpp"
#include "twell/kernels/transformer_ops.hpp"
#include "twell/tokens.hpp"
#include "twell/twell_kernel_request.hpp"
#include "twell/version.hpp"

namespace {

struct Settings {
  std::string checkpoint;
  std::uint32_t batch = 64, sequence = 2048;
  int warmup = 5, repetitions = 20;
  std::uint64_t seed = 0;
  std::uint32_t compression = 8;
  twell::TwellKernelRequest twell_kernels;
  bool breakdown = true, statistics = true, attention = true;
  std::string output;
};

void add_options(CLI::App& app, Settings& s) {
  app.add_option("--checkpoint", s.checkpoint, "checkpoint directory")->required();
  app.add_option("--batch", s.batch)->check(CLI::PositiveNumber);
  app.add_option("--sequence", s.sequence)->check(CLI::PositiveNumber);
  app.add_option("--warmup", s.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--repetitions", s.repetitions)->check(CLI::PositiveNumber);
  app.add_option("--seed", s.seed, "token sampling seed");
  app.add_option("--compression", s.compression, "TwELL compression factor C")
      ->check(CLI::IsMember({2, 4, 8}));
  app.add_option_function<std::string>(
         "--twell-kernels",
         [&s](const std::string& text) { s.twell_kernels = twell::parse_twell_kernel_request(text); },
         "TwELL kernels as gate[/up_down[/overflow]] (default auto)")
      ->check([](const std::string& text) {
        try {
          twell::parse_twell_kernel_request(text);
          return std::string();
        } catch (const twell::Error& error) {
          return std::string(error.what());
        }
      });
  app.add_flag("--no-breakdown{false}", s.breakdown, "skip the per-operation breakdown");
  app.add_flag("--no-statistics{false}", s.statistics,
               "skip the activation statistics, and with them the per-layer dispatch forward");
  app.add_flag("--no-attention{false}", s.attention, "skip attention");
  app.add_option("--output", s.output, "JSON file (written atomically); stdout when absent");
}

struct Timing {
  std::vector<double> ms;
  double mean() const { return std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size()); }
  double median() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  double stdev() const {
    const double m = mean();
    double sum = 0;
    for (double v : ms) sum += (v - m) * (v - m);
    return ms.size() > 1 ? std::sqrt(sum / static_cast<double>(ms.size() - 1)) : 0.0;
  }
};

/// `name` is "dense", "twell", or "dispatch" (options.layer_paths set per layer).
nlohmann::json run_forward(twell::Backend& backend, const twell::TokenBatch& tokens,
                           const twell::ForwardOptions& options, const char* name, const Settings& settings) {
  twell::TraceTag tag;
  tag.phase = "end_to_end";
  tag.path = name;
  std::cerr << "[" << name << "] warm-up x" << settings.warmup << "\n";
  std::uint64_t overflow_rows = 0;
  for (int i = 0; i < settings.warmup; ++i) backend.forward(tokens, options, nullptr, tag, {});
  Timing timing;
  for (int i = 0; i < settings.repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const twell::ForwardResult result = backend.forward(tokens, options, nullptr, tag, {});
    const auto stop = std::chrono::steady_clock::now();
    timing.ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    if (i == 0)
      for (const auto& layer : result.layers) overflow_rows += layer.overflow_rows;
  }
  const double tokens_count = static_cast<double>(tokens.count());
  nlohmann::json out = {{"mean_ms", timing.mean()},
                        {"median_ms", timing.median()},
                        {"min_ms", *std::min_element(timing.ms.begin(), timing.ms.end())},
                        {"stdev_ms", timing.stdev()},
                        {"tokens_per_ms", tokens_count / timing.mean()},
                        {"repetition_ms", timing.ms},
                        {"overflow_rows_all_layers", overflow_rows}};
  std::fprintf(stderr, "[%s] %.2f ms mean (median %.2f, sd %.2f) -> %.1f tokens/ms\n", name, timing.mean(),
               timing.median(), timing.stdev(), tokens_count / timing.mean());

  if (settings.breakdown) {
    // One traced forward: CUDA events around every tagged launch group, summed per op over layers.
    auto tracer = twell::gpu_trace::make_cuda_event_tracer(backend.native_stream(), "per-op breakdown");
    backend.forward(tokens, options, tracer.get(), tag, {});
    std::map<std::string, double> per_op_ms;
    double traced_total = 0;
    for (const twell::KernelRecord& record : tracer->collect()) {
      const double ms = record.duration_us() / 1000.0;
      per_op_ms[record.tag.op] += ms;
      traced_total += ms;
    }
    nlohmann::json ops = nlohmann::json::object();
    for (const auto& [op, ms] : per_op_ms)
      ops[op] = {{"ms", ms}, {"share", traced_total > 0 ? ms / traced_total : 0}};
    out["breakdown"] = {{"tracer", tracer->info().name}, {"sum_of_ops_ms", traced_total}, {"ops", ops}};
    std::fprintf(stderr, "[%s] per-op time over all layers (one traced forward):\n", name);
    for (const auto& [op, ms] : per_op_ms)
      std::fprintf(stderr, "    %-16s %9.2f ms  %5.1f %%\n", op.c_str(), ms, 100.0 * ms / traced_total);
  }
  return out;
}

twell::ForwardOptions forward_options(twell::FfnPath path, const Settings& settings) {
  twell::ForwardOptions options;
  options.ffn_path = path;
  options.ffn.compression = settings.compression;
  options.ffn.twell_kernels = settings.twell_kernels;
  return options;
}

/// Fills `densities` with each layer's measured gate density.
nlohmann::json measure_density(twell::Backend& backend, const twell::TokenBatch& tokens,
                               std::vector<double>& densities) {
  twell::ForwardOptions options;
  options.capture_statistics = true;
  const twell::ForwardResult result = backend.forward(tokens, options, nullptr, twell::TraceTag{}, {});
  nlohmann::json layers = nlohmann::json::array();
  double total_density = 0;
  for (const auto& layer : result.layers) {
    const auto& s = layer.summary;
    const double nnz = std::accumulate(s.nnz_per_token.begin(), s.nnz_per_token.end(), 0.0);
    const double density = nnz / (static_cast<double>(s.tokens) * s.neurons);
    std::size_t fullest = 0;
    for (std::size_t k = 0; k < s.tile_count_histogram.size(); ++k)
      if (s.tile_count_histogram[k]) fullest = k;
    layers.push_back(
        {{"density", density}, {"nnz_per_token_mean", nnz / s.tokens}, {"fullest_tile", fullest}});
    densities.push_back(density);
    total_density += density;
  }
  const double mean = result.layers.empty() ? 0 : total_density / static_cast<double>(result.layers.size());
  std::fprintf(stderr, "measured FFN gate density: %.3f %% (mean over layers)\n", 100.0 * mean);
  return {{"mean_density", mean}, {"layers", layers}};
}

nlohmann::json time_attention(const twell::ModelConfig& config, const Settings& settings) {
  const int q_heads = static_cast<int>(config.num_attention_heads);
  const int kv_heads =
      static_cast<int>(config.num_key_value_heads > 0 ? config.num_key_value_heads : q_heads);
  const int head_dim = static_cast<int>(config.head_dim);
  const std::size_t m = static_cast<std::size_t>(settings.batch) * settings.sequence;
  twell::cuda::DeviceBuffer<__nv_bfloat16> qkv(m * static_cast<std::size_t>(q_heads + 2 * kv_heads) *
                                               head_dim);
  twell::cuda::DeviceBuffer<__nv_bfloat16> out(m * static_cast<std::size_t>(q_heads) * head_dim);
  TWELL_CUDA_CHECK(cudaMemset(qkv.data(), 0x3c, qkv.bytes()));  // the work does not depend on the values
  twell::cuda::Stream stream;
  const twell::cuda::AttentionShape shape{static_cast<int>(settings.batch),
                                          static_cast<int>(settings.sequence), q_heads, kv_heads, head_dim};
  for (int i = 0; i < 3; ++i) twell::cuda::flash_attention(qkv.data(), shape, out.data(), stream.get());
  Timing timing;
  for (int i = 0; i < std::max(settings.repetitions, 10); ++i) {
    twell::cuda::Event start, stop;
    start.record(stream.get());
    twell::cuda::flash_attention(qkv.data(), shape, out.data(), stream.get());
    stop.record(stream.get());
    stop.synchronize();
    timing.ms.push_back(stop.elapsed_ms_since(start));
  }
  const double pairs = static_cast<double>(settings.batch) * q_heads * settings.sequence *
                       (static_cast<double>(settings.sequence) + 1) / 2;
  const double flops = 4.0 * head_dim * pairs;  // Q K^T and P V over the causal half
  const double tflops = flops / (timing.median() * 1e-3) / 1e12;
  std::fprintf(stderr, "attention alone (one layer): %.3f ms median, %.0f TFLOP/s\n", timing.median(),
               tflops);
  return {{"median_ms_per_layer", timing.median()},
          {"mean_ms_per_layer", timing.mean()},
          {"tflops", tflops},
          {"flops_per_layer", flops}};
}

std::string utc_now() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

int run(const Settings& settings, int argc, char** argv) {
  const std::string command = twell::test::command_line(argc, argv);

  const twell::Checkpoint checkpoint = twell::Checkpoint::open(settings.checkpoint);
  const twell::ModelConfig& config = checkpoint.config();
  auto backend = twell::cuda::make_cuda_backend(0);
  const twell::DeviceInfo device = backend->device();
  std::cerr << "loading " << settings.checkpoint << " onto " << device.name << "\n";
  const auto load_start = std::chrono::steady_clock::now();
  backend->load(checkpoint);
  backend->check_ffn_options(forward_options(twell::FfnPath::Twell, settings).ffn);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const twell::TokenBatch tokens = twell::random_tokens(
      settings.batch, settings.sequence, static_cast<std::uint32_t>(config.vocab_size), settings.seed);

  nlohmann::json results;
  // The reference runs TwELL first, then the dense baseline.
  results["twell"] =
      run_forward(*backend, tokens, forward_options(twell::FfnPath::Twell, settings), "twell", settings);
  results["dense"] =
      run_forward(*backend, tokens, forward_options(twell::FfnPath::Dense, settings), "dense", settings);
  const double dense_tokens_per_ms = results["dense"]["tokens_per_ms"].get<double>();
  const double ratio = results["twell"]["tokens_per_ms"].get<double>() / dense_tokens_per_ms;
  results["twell_over_dense_tokens_per_ms"] = ratio;
  std::fprintf(stderr, "TwELL / dense throughput: %.3fx\n", ratio);

  nlohmann::json density;
  if (settings.statistics) {
    // The per-layer dispatch needs each layer's density: measured on these tokens, as the
    // profiler's capture forward does.
    std::vector<double> densities;
    density = measure_density(*backend, tokens, densities);
    twell::ForwardOptions dispatch = forward_options(twell::FfnPath::Dense, settings);
    const std::optional<twell::FfnBreakEven> break_even =
        backend->ffn_break_even(tokens.count(), dispatch.ffn);
    if (break_even) {
      dispatch.layer_paths = twell::choose_ffn_paths(densities, *break_even);
      nlohmann::json paths = nlohmann::json::array();
      for (const twell::FfnPath path : dispatch.layer_paths) paths.push_back(twell::to_string(path));
      results["dispatch"] = run_forward(*backend, tokens, dispatch, twell::kDispatchForwardPath, settings);
      results["dispatch"]["layer_paths"] = paths;
      results["dispatch"]["break_even"] = {
          {"density", break_even->density}, {"measured", break_even->measured}, {"basis", break_even->basis}};
      const double dispatch_ratio = results["dispatch"]["tokens_per_ms"].get<double>() / dense_tokens_per_ms;
      results["dispatch_over_dense_tokens_per_ms"] = dispatch_ratio;
      std::fprintf(stderr, "per-layer dispatch / dense throughput: %.3fx (TwELL in %zu of %zu layers)\n",
                   dispatch_ratio,
                   static_cast<std::size_t>(std::count(dispatch.layer_paths.begin(),
                                                       dispatch.layer_paths.end(), twell::FfnPath::Twell)),
                   dispatch.layer_paths.size());
    }
  }

  nlohmann::json document = {
      {"benchmark", "end_to_end"},
      {"date", utc_now()},
      {"gpu",
       {{"name", device.name},
        {"compute_capability", device.compute_capability},
        {"multiprocessors", device.multiprocessor_count},
        {"memory_bytes", device.memory_bytes},
        {"driver", device.driver_version},
        {"runtime", device.runtime_version},
        {"kernel_family", device.kernel_family}}},
      {"twellscope", {{"version", twell::version()}, {"commit", twell::git_commit()}}},
      {"command", command},
      {"checkpoint", settings.checkpoint},
      {"model",
       {{"model_type", config.model_type},
        {"layers", checkpoint.layer_count()},
        {"hidden_size", config.hidden_size},
        {"intermediate_size", config.intermediate_size},
        {"heads", config.num_attention_heads},
        {"kv_heads", config.num_key_value_heads},
        {"head_dim", config.head_dim},
        {"vocab_size", config.vocab_size}}},
      {"protocol",
       {{"timed",
         "backbone only: embedding, decoder layers, final norm (no LM head); host clock around "
         "each forward, which ends with a stream synchronisation"},
        {"batch", settings.batch},
        {"sequence", settings.sequence},
        {"tokens", tokens.count()},
        {"token_ids", tokens.source},
        {"warmup", settings.warmup},
        {"repetitions", settings.repetitions},
        {"compression", settings.compression},
        {"twell_kernels", twell::to_string(settings.twell_kernels)}}},
      {"load_seconds", load_s},
      {"results", results}};
  if (settings.statistics) document["ffn_density"] = density;
  if (settings.attention) {
    backend.reset();  // attention alone gets the device memory to itself
    document["attention_alone"] = time_attention(config, settings);
  }

  twell::test::write_benchmark_json(document, settings.output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  CLI::App app{"One forward pass of a checkpoint's backbone, dense against TwELL, end to end"};
  add_options(app, settings);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(settings, argc, argv);
  } catch (const twell::Error& error) {
    std::cerr << "bench_end_to_end: " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "bench_end_to_end: " << error.what() << "\n";
    return 1;
  }
}
