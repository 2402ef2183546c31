// SPDX-License-Identifier: GPL-3.0-or-later
#include "sample_report.hpp"

#include <cstdint>
#include <vector>

#include "twell/activation_summary.hpp"
#include "twell/sparsity_stats.hpp"

namespace twellscope::test {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

twell::TimingStat stat(double us) {
  return {us, us * 0.95, us * 1.1, 5};
}

twell::KernelRecord record(int layer, const std::string& path, const std::string& op, const std::string& name,
                           std::uint64_t start_ns, double us) {
  twell::KernelRecord r;
  r.name = name;
  r.start_ns = start_ns;
  r.end_ns = start_ns + std::uint64_t(us * 1000);
  r.grid = {132, 1, 1};
  r.block = {256, 1, 1};
  r.registers_per_thread = 96;
  r.static_shared_bytes = 16384;
  r.tag = {"layer_ffn", layer, path, op, 0, false};
  r.attributed = true;
  return r;
}

}  // namespace

double sampleDenseUs(int layer) {
  return 100.0 + 10.0 * layer;
}

double sampleTwellUs(int layer) {
  return sampleDenseUs(layer) * (0.6 + 2.0 * kSampleDensities[layer]);
}

twell::Report makeSampleReport() {
  twell::Report report;
  report.tool_version = "0.1.0";
  report.tool_commit = "test";
  report.created_utc = "2026-01-01T00:00:00Z";
  report.host = "test-host";
  report.device = {"cuda", "Test GPU", "9.0", 132, 141ull << 30, "580.00", "13.0", "hopper-sm90a"};
  report.tracer = {"cupti", "gpu", "", true};
  report.model.source = "sample";
  report.model.config.model_type = "llama_sparse_relu";
  report.model.config.hidden_size = 256;
  report.model.config.intermediate_size = kSampleNeurons;
  report.model.config.num_hidden_layers = kSampleLayers;
  report.model.config.num_attention_heads = 4;
  report.model.config.num_key_value_heads = 4;
  report.model.config.head_dim = 64;
  report.model.config.vocab_size = 512;
  report.model.activation = {twell::Activation::Relu, "model_type llama_sparse_relu uses ReLU"};
  report.config.batch = 1;
  report.config.sequence = kSampleTokens;
  report.config.token_source = "random(seed=1)";
  report.config.compression = 8;
  report.config.twell_kernels = {"sm90", "balanced_cta", "sparse"};

  std::uint64_t clock_ns = 1'000'000;
  for (int layer = 0; layer < kSampleLayers; ++layer) {
    std::vector<float> preactivations(std::size_t(kSampleTokens) * kSampleNeurons, -1.0f);
    for (std::uint32_t t = 0; t < kSampleTokens; ++t)
      for (std::uint32_t n = 0; n < kSampleNeurons; ++n) {
        if (n % kSampleDeadStride == 0) continue;
        const double u =
            double(mix((std::uint64_t(layer) << 40) ^ (std::uint64_t(t) << 20) ^ n) % 1'000'000) / 1e6;
        if (u < kSampleDensities[layer]) preactivations[std::size_t(t) * kSampleNeurons + n] = 1.0f;
      }
    const twell::ActivationSummary summary = twell::summarize_preactivations(
        preactivations.data(), kSampleTokens, kSampleNeurons, twell::MapShape{32, 128});
    twell::LayerReport l;
    l.index = layer;
    l.sparsity = twell::compute_sparsity_stats(summary);
    const double dense = sampleDenseUs(layer), twellUs = sampleTwellUs(layer);
    l.paths.push_back(
        {"dense", stat(dense), {{"gate_up", stat(dense * 0.7)}, {"down", stat(dense * 0.3)}}, 0});
    l.paths.push_back({"twell",
                       stat(twellUs),
                       {{"gate_pack", stat(twellUs * 0.5)}, {"up_down", stat(twellUs * 0.5)}},
                       l.sparsity.capacity.empty() ? 0 : l.sparsity.capacity[0].overflow_rows});
    l.twell_vs_dense = twell::ErrorMetrics{1e-3 * (layer + 1), 0.01, 0.9999};
    report.layers.push_back(l);

    report.kernels.push_back({"cublasLt_gemm_gate_up", layer, "dense", "gate_up", stat(dense * 0.7)});
    report.kernels.push_back({"cublasLt_gemm_down", layer, "dense", "down", stat(dense * 0.3)});
    report.kernels.push_back({"twell_gate_pack<8>", layer, "twell", "gate_pack", stat(twellUs * 0.5)});
    report.kernels.push_back({"twell_up_down", layer, "twell", "up_down", stat(twellUs * 0.5)});
    report.timeline.push_back(
        record(layer, "dense", "gate_up", "cublasLt_gemm_gate_up", clock_ns, dense * 0.7));
    report.timeline.push_back(record(layer, "dense", "down", "cublasLt_gemm_down",
                                     clock_ns + std::uint64_t(dense * 700), dense * 0.3));
    clock_ns += std::uint64_t(dense * 1000) + 5000;
    report.timeline.push_back(
        record(layer, "twell", "gate_pack", "twell_gate_pack<8>", clock_ns, twellUs * 0.5));
    report.timeline.push_back(record(layer, "twell", "up_down", "twell_up_down",
                                     clock_ns + std::uint64_t(twellUs * 500), twellUs * 0.5));
    clock_ns += std::uint64_t(twellUs * 1000) + 5000;
  }
  report.kernel_variants = {
      {"twell_up_down", false, "twell", "up_down", "sm_80+", "fused consumer, one CTA per token"}};
  // The device busy 95 % of the dense forward and 90 % of the TwELL one; the dispatch forward as a
  // report before 1.5 has it, without the occupied time.
  report.end_to_end.push_back({"dense", stat(640.0), 100.0, stat(608.0)});
  report.end_to_end.push_back({"twell", stat(533.3), 120.0, stat(479.97)});
  report.end_to_end.push_back({twell::kDispatchForwardPath, stat(500.0), 128.0});
  return report;
}

}  // namespace twellscope::test
