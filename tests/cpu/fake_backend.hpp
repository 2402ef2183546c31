// SPDX-License-Identifier: GPL-3.0-or-later
// Tests only: a Backend whose "work" is pushing the tags a real backend pushes, with a scripted
// tracer that turns each tag into kernels of known durations, so session results are exact.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scripted_tracer.hpp"
#include "twell/activation_summary.hpp"
#include "twell/backend.hpp"
#include "twell/error.hpp"
#include "twell/report.hpp"
#include "twell/session.hpp"
#include "twell/tokens.hpp"

namespace twell::test::fake {

using twell::FfnPath;
using twell::test::ScriptedLaunch;
using twell::test::ScriptedTracer;

inline constexpr int kLayers = 3;
inline constexpr std::uint32_t kNeurons = 512;

inline twell::ModelSummary fake_model() {
  twell::ModelSummary model;
  model.source = "fake";
  model.config.model_type = "llama_sparse_relu";
  model.config.hidden_size = 16;
  model.config.intermediate_size = kNeurons;
  model.config.num_hidden_layers = kLayers;
  model.config.num_attention_heads = 2;
  model.config.num_key_value_heads = 2;
  model.config.head_dim = 8;
  model.config.vocab_size = 64;
  model.activation = {twell::Activation::Relu, "fake"};
  model.parameters = 1234;
  return model;
}

/// Every layer fires one neuron in 16 per token; layer 1 also packs 40 non-zeros into the first
/// tile of its first 3 tokens, over TwELL's capacity at C=8 (31) but not at C=4 (63).
inline twell::ActivationSummary fake_summary(std::size_t layer, std::uint32_t tokens) {
  std::vector<float> pre(std::size_t(tokens) * kNeurons, -1.0f);
  for (std::uint32_t i = 0; i < tokens; ++i)
    for (std::uint32_t j = 0; j < kNeurons; ++j)
      if (j % 16 == (i + layer) % 16 || (layer == 1 && i < 3 && j < 40))
        pre[std::size_t(i) * kNeurons + j] = 1.0f;
  return twell::summarize_preactivations(pre.data(), tokens, kNeurons, {8, 16});
}

/// A Backend whose "work" is pushing the same tags a real one pushes; the ScriptedTracer turns
/// each tag into kernels. Counts what the session asked of it.
class FakeBackend final : public twell::Backend {
 public:
  twell::DeviceInfo device_info{"cuda", "Fake GPU", "9.0", 132, 1 << 30, "580", "13.0", "hopper-sm90a"};
  std::map<std::pair<std::size_t, std::string>, int> layer_runs;
  int flushes = 0, compares = 0, forwards = 0;
  std::vector<std::vector<FfnPath>> forward_layer_paths;  ///< ForwardOptions::layer_paths of each forward
  std::optional<std::size_t> fail_in_layer;       ///< run_layer_ffn on this layer throws a device error
  bool fail_end_to_end = false;                   ///< forwards without statistics throw a device error
  std::optional<twell::FfnBreakEven> break_even;  ///< what ffn_break_even answers (none by default)
  mutable std::optional<std::size_t> break_even_tokens;  ///< the token count it was last asked for

  twell::DeviceInfo device() const override { return device_info; }
  void load(const twell::Checkpoint&) override {}
  const twell::ModelConfig& config() const override { return m_model.config; }
  twell::Activation activation() const override { return twell::Activation::Relu; }

  twell::ForwardResult forward(const twell::TokenBatch& tokens, const twell::ForwardOptions& options,
                               twell::Tracer* tracer, const twell::TraceTag& base,
                               const twell::LayerHook& hook) override {
    ++forwards;
    options.check_layer_paths(kLayers);
    forward_layer_paths.push_back(options.layer_paths);
    if (fail_end_to_end && !options.capture_statistics)
      throw twell::Error(twell::Error::Kind::Device, "scripted device fault in a forward");
    twell::ForwardResult result;
    result.layers.resize(kLayers);
    { const twell::ScopedTrace scope(tracer, with(base, -1, "", "embedding")); }
    for (std::size_t layer = 0; layer < kLayers; ++layer) {
      { const twell::ScopedTrace scope(tracer, with(base, int(layer), "", "attention")); }
      m_current = int(layer);
      if (hook) hook(layer);
      m_current = -1;
      run_ops(layer, options.path_of(layer), tracer, base);
      if (options.capture_statistics)
        result.layers[layer].summary = fake_summary(layer, static_cast<std::uint32_t>(tokens.count()));
      if (options.on_layer_done) options.on_layer_done(layer, result.layers[layer]);
    }
    return result;
  }

  std::uint64_t run_layer_ffn(std::size_t layer, FfnPath path, const twell::FfnOptions&,
                              twell::Tracer* tracer, const twell::TraceTag& tag) override {
    if (m_current != int(layer))
      throw twell::Error(twell::Error::Kind::Internal, "run_layer_ffn outside its hook");
    if (fail_in_layer == layer)
      throw twell::Error(twell::Error::Kind::Device,
                         "scripted device fault in layer " + std::to_string(layer));
    ++layer_runs[{layer, twell::to_string(path)}];
    run_ops(layer, path, tracer, tag);
    return path == FfnPath::Twell ? 7 : 0;
  }
  twell::ErrorMetrics compare_layer_ffn_outputs(FfnPath, FfnPath) override {
    ++compares;
    return {1e-3, 2e-3, 0.9999};
  }
  twell::Matrix ffn(std::size_t, const twell::Matrix& input, FfnPath, const twell::FfnOptions&) override {
    return input;
  }
  void flush_cache() override { ++flushes; }
  std::optional<twell::FfnBreakEven> ffn_break_even(std::size_t tokens,
                                                    const twell::FfnOptions&) const override {
    break_even_tokens = tokens;
    return break_even;
  }

 private:
  static twell::TraceTag with(const twell::TraceTag& base, int layer, const std::string& path,
                              const char* op) {
    twell::TraceTag tag = base;
    tag.layer = layer;
    if (tag.path.empty()) tag.path = path;
    tag.op = op;
    return tag;
  }
  void run_ops(std::size_t layer, FfnPath path, twell::Tracer* tracer, const twell::TraceTag& base) {
    const std::string name = twell::to_string(path);
    for (const char* op : path == FfnPath::Dense ? std::vector<const char*>{"gate_up", "down"}
                                                 : std::vector<const char*>{"gate_pack", "up_down"}) {
      const twell::ScopedTrace scope(tracer, with(base, int(layer), name, op));
    }
  }
  twell::ModelSummary m_model = fake_model();
  int m_current = -1;
};

/// Dense: 3 + 1 µs; TwELL: 1 + 1 µs, except layer 2's up_down (10 µs) which makes it slower than
/// dense; warm-ups take 50 µs per kernel so that any leak into the statistics shows.
inline std::vector<ScriptedLaunch> script(const twell::TraceTag& tag) {
  if (tag.warmup) return {{"warmup_kernel", 50'000}};
  if (tag.op == "embedding") return {{"embed", 1000}};
  if (tag.op == "attention") return {{"flash_attention", 500}};
  if (tag.op == "gate_up") return {{"nvjet_gemm<bf16, 128>", 3000}};
  if (tag.op == "down") return {{"nvjet_gemm<bf16, 64>", 1000}};
  if (tag.op == "gate_pack") return {{"twell_gate_pack", 1000}};
  if (tag.op == "up_down") return {{"twell_up_down", tag.layer == 2 ? 10'000u : 1000u}};
  return {};
}

struct SessionFixture {
  FakeBackend backend;
  ScriptedTracer tracer;
  twell::TokenBatch tokens = twell::random_tokens(2, 8, 64, 3);
  twell::ProfileConfig config;
  explicit SessionFixture(ScriptedTracer::Mode mode = ScriptedTracer::Mode::PerKernel,
                          std::string fallback = {})
      : tracer(mode, std::move(fallback)) {
    tracer.set_script(script);
    tracer.set_gap_ns(0);
    config.warmup = 2;
    config.repetitions = 3;
    config.map_shape = {8, 16};
  }
  twell::Report run(const twell::ProgressCallback& progress = {}) {
    twell::Session session(backend, tracer, fake_model());
    return session.run(config, tokens, progress);
  }
};

}  // namespace twell::test::fake
