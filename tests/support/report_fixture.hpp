// SPDX-License-Identifier: GPL-3.0-or-later
// Synthetic reports for the report I/O, export and schema tests and for bench_report_io: every
// field filled, deterministic from a seed. Header-only so benchmarks can use it too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "twell/report.hpp"
#include "twell/sparsity_stats.hpp"

namespace twell::test {

struct SyntheticReportShape {
  int layers = 3;
  std::uint32_t neurons = 512;
  std::uint32_t tokens = 64;
  std::int64_t hidden = 128;
  MapShape map{16, 32};
  /// Kernel names used for the per-kernel stats and the timeline (cycled).
  std::vector<std::string> kernel_names{"twell_gate_pack<128, 8>", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"};
  std::uint64_t seed = 7;
};

/// A small counter-free LCG: the fixture must not depend on <random>'s distributions, whose
/// output differs between standard libraries.
class FixtureRng {
 public:
  explicit FixtureRng(std::uint64_t seed) : m_state(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
  std::uint32_t next() {
    m_state = m_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(m_state >> 33);
  }
  std::uint32_t below(std::uint32_t bound) { return bound == 0 ? 0 : next() % bound; }

 private:
  std::uint64_t m_state;
};

inline ActivationSummary synthetic_summary(std::uint32_t tokens, std::uint32_t neurons,
                                           const MapShape& map_shape, FixtureRng& rng) {
  ActivationSummary s;
  s.tokens = tokens;
  s.neurons = neurons;
  s.nnz_per_token.resize(tokens);
  for (auto& nnz : s.nnz_per_token) nnz = rng.below(neurons / 16 + 1);
  s.neuron_fire_counts.resize(neurons);
  for (auto& count : s.neuron_fire_counts) count = rng.below(5) == 0 ? 0 : rng.below(tokens + 1);
  s.tile_count_histogram.assign(kTwellTileWidth + 1, 0);
  s.row_max_tile_histogram.assign(kTwellTileWidth + 1, 0);
  const std::uint32_t tiles = (neurons + kTwellTileWidth - 1) / kTwellTileWidth;
  for (std::uint32_t t = 0; t < tokens; ++t) {
    std::uint32_t row_max = 0;
    for (std::uint32_t tile = 0; tile < tiles; ++tile) {
      const std::uint32_t k = rng.below(48);
      ++s.tile_count_histogram[k];
      row_max = std::max(row_max, k);
    }
    ++s.row_max_tile_histogram[row_max];
  }
  const MapGeometry geometry = map_geometry(tokens, neurons, map_shape);
  s.map.rows = geometry.rows;
  s.map.cols = geometry.cols;
  s.map.tokens = tokens;
  s.map.neurons = neurons;
  s.map.cells.resize(std::size_t(geometry.rows) * geometry.cols);
  for (auto& cell : s.map.cells) cell = static_cast<std::uint8_t>(rng.below(256));
  return s;
}

inline TimingStat synthetic_timing(double median_us) {
  return {median_us, median_us * 0.9, median_us * 1.25, 5};
}

inline Report make_synthetic_report(const SyntheticReportShape& shape = {}) {
  FixtureRng rng(shape.seed);
  Report report;
  report.tool_version = "0.1.0";
  report.tool_commit = "0123456789ab";
  report.created_utc = "2026-12-02T08:00:00Z";
  report.host = "gpu-server-1";
  report.device = {"cuda", "NVIDIA H200", "9.0", 132, 150'000'000'000ULL, "580.65", "13.0", "hopper-sm90a"};
  report.tracer = {"cupti", "gpu", "", true};
  report.model.source = "/models/sparse \"2b\"";
  report.model.config.model_type = "llama_sparse_relu";
  report.model.config.hidden_size = shape.hidden;
  report.model.config.intermediate_size = shape.neurons;
  report.model.config.num_hidden_layers = shape.layers;
  report.model.config.num_attention_heads = 4;
  report.model.config.num_key_value_heads = 2;
  report.model.config.head_dim = shape.hidden / 4;
  report.model.config.rms_norm_eps = 1e-5;
  report.model.config.rope_theta = 500000.0;
  report.model.config.rope_scaling = R"({"type":"linear","factor":2.0})";
  report.model.config.vocab_size = 32000;
  report.model.config.hidden_act = "relu";
  report.model.activation = {Activation::Relu, "model_type llama_sparse_relu uses ReLU"};
  report.model.parameters = 2'000'000'000ULL;
  report.config.batch = 1;
  report.config.sequence = shape.tokens;
  report.config.token_source = "random(seed=1)";
  report.config.map_shape = shape.map;

  std::uint64_t record_clock = 1'000'000;
  for (int l = 0; l < shape.layers; ++l) {
    LayerReport layer;
    layer.index = l;
    layer.sparsity = compute_sparsity_stats(synthetic_summary(shape.tokens, shape.neurons, shape.map, rng));
    const double dense_us = 100.0 + rng.below(1000) / 10.0;
    const double twell_us = 40.0 + rng.below(1000) / 10.0;
    layer.paths.push_back(
        {"dense",
         synthetic_timing(dense_us),
         {{"gate_up", synthetic_timing(dense_us * 0.7)}, {"down", synthetic_timing(dense_us * 0.3)}},
         0});
    layer.paths.push_back(
        {"twell",
         synthetic_timing(twell_us),
         {{"gate_pack", synthetic_timing(twell_us * 0.6)}, {"up_down", synthetic_timing(twell_us * 0.4)}},
         layer.sparsity.capacity.empty() ? 0 : layer.sparsity.capacity.front().overflow_rows});
    layer.twell_vs_dense = ErrorMetrics{1e-3 + l * 1e-5, 0.0078125, 0.99999};
    report.layers.push_back(std::move(layer));

    for (const char* path : {"dense", "twell"}) {
      for (std::size_t k = 0; k < shape.kernel_names.size(); ++k) {
        const std::string op = k == 0 ? (path == std::string("dense") ? "gate_up" : "gate_pack") : "down";
        report.kernels.push_back({shape.kernel_names[k], l, path, op, synthetic_timing(10.0 + double(k))});
        KernelRecord record;
        record.name = shape.kernel_names[k];
        record.start_ns = record_clock;
        record.end_ns = record.start_ns + 5'000 + k * 1'000;
        record_clock = record.end_ns + 2'000;
        record.device = 0;
        record.context = 1;
        record.stream = 7;
        record.grid = {132, 1, 1};
        record.block = {256, 1, 1};
        record.registers_per_thread = 128;
        record.dynamic_shared_bytes = 49152;
        record.correlation_id = 100 + report.timeline.size();
        record.tag = {"layer_ffn", l, path, op, 0, false};
        record.attributed = true;
        report.timeline.push_back(record);
      }
    }
  }
  // One variant told by its function name (kernel_names[0] with the default names), one library
  // variant told by its op.
  report.kernel_variants = {
      {"twell_gate_pack", false, "twell", "gate_pack", "sm_80+",
       "the gate GEMM with the TwELL packing epilogue"},
      {"cuBLASLt bf16 GEMM", true, "dense", "down", "any", "h Wd^T with fp32 accumulation"}};
  report.end_to_end.push_back({"dense", synthetic_timing(5000.0), double(shape.tokens) / 5.0});
  report.end_to_end.push_back({"twell", synthetic_timing(4000.0), double(shape.tokens) / 4.0});
  report.warnings = {"TwELL is slower than dense (below break-even) in 1 of 3 layers: layer 2"};
  return report;
}

}  // namespace twell::test
