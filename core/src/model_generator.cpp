// SPDX-License-Identifier: GPL-3.0-or-later
// The synthetic-model generator: presets, the layer-by-layer calibration on the CPU forward, and
// the streamed bf16 output.
#include "twell/model_generator.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <span>

#include <nlohmann/json.hpp>

#include "counter_rng.hpp"
#include "cpu_ffn_stages.hpp"
#include "generator_calibration.hpp"
#include "generator_weights.hpp"
#include "reference_parallel.hpp"
#include "twell/atomic_file.hpp"
#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"
#include "twell/reference_forward.hpp"
#include "twell/safetensors.hpp"
#include "twell/tokens.hpp"
#include "twell/version.hpp"

namespace twell {
namespace {

// The construction's constants (docs MODELS.md §4.1-4.2).
constexpr std::size_t kBiasChannel = 0;
constexpr double kInitStd = 0.02;          // initializer_range: every random weight
constexpr float kBiasChannelValue = 0.1f;  // h[u] in every layer: ~5 sigma of an embedding entry
constexpr double kBiasInputScale = 4.0;    // mean x[u] at the FFN input, against ~1 for other channels
constexpr double kLogRateSigma = 1.2;      // heavy tail of per-neuron rates
constexpr double kMaxRate = 0.9;
constexpr double kDensitySpread = 0.4;  // first layer 1.4x the mean density, last 0.6x
constexpr std::size_t kTopics = 32;
constexpr double kTopicWeight = 0.6;
constexpr double kTokenScaleSigma = 0.5;
// o_proj's sigma is kAttentionOutputGain / (D sqrt(2L)), so what attention adds per entry stays a
// fixed fraction of an embedding entry whatever D. Random attention is near-uniform: what it
// writes is mostly its sequence's early tokens, shared by every later position. Any larger, that
// shared part outgrows the per-token part within a few layers, and gates calibrated on a few
// sequences stop holding on new ones (measured: SparseLM shapes at the plain scaled init fired
// 4x the target by layer 8 on unseen sequences).
constexpr double kAttentionOutputGain = 3.0;

GeneratorPreset make_preset(const std::string& name, const std::string& description, std::int64_t hidden,
                            std::int64_t intermediate, std::int64_t layers, std::int64_t heads,
                            std::int64_t kv_heads, std::int64_t vocab) {
  GeneratorPreset preset;
  preset.name = name;
  preset.description = description;
  preset.hidden_size = hidden;
  preset.intermediate_size = intermediate;
  preset.layers = layers;
  preset.heads = heads;
  preset.kv_heads = kv_heads;
  preset.vocab_size = vocab;
  return preset;
}

std::vector<GeneratorPreset> make_presets() {
  std::vector<GeneratorPreset> presets;
  presets.reserve(6);  // the references below stay valid
  // Calibration sequences: half fit the gates, half validate them (see generate_layer).
  auto& tiny = presets.emplace_back(
      make_preset("tiny", "a few MB for tests: d_model 256, d_ff 768, 2 layers, 4 heads (2 KV), vocab 512",
                  256, 768, 2, 4, 2, 512));
  tiny.default_density = 0.02;
  tiny.calibration_batch = 8;
  tiny.calibration_sequence = 256;
  auto& demo = presets.emplace_back(
      make_preset("demo", "the built-in demo: d_model 512, d_ff 1536, 4 layers, 8 heads, vocab 4096", 512,
                  1536, 4, 8, 8, 4096));
  demo.default_density = 0.01;
  demo.calibration_batch = 8;
  demo.calibration_sequence = 256;
  // SparseLM shapes: 1024 calibration tokens keep a 2B model's calibration to minutes on two cores;
  // short sequences, because how many contexts the gates see matters more than their length.
  const std::pair<const char*, std::int64_t> sparselm[] = {{"0.5b", 8}, {"1b", 18}, {"1.5b", 28}, {"2b", 38}};
  for (const auto& [size, layers] : sparselm) {
    auto& preset =
        presets.emplace_back(make_preset(std::string("sparselm-") + size,
                                         "SparseLM shapes: d_model 2048, d_ff 5632, " +
                                             std::to_string(layers) + " layers, 32 heads, vocab 49152",
                                         2048, 5632, layers, 32, 32, 49152));
    preset.default_density = 0.005;
    preset.calibration_batch = 8;
    preset.calibration_sequence = 128;
  }
  return presets;
}

ModelConfig config_of(const GeneratorPreset& preset) {
  ModelConfig config;
  config.model_type = "llama_sparse_relu";
  config.hidden_size = preset.hidden_size;
  config.intermediate_size = preset.intermediate_size;
  config.num_hidden_layers = preset.layers;
  config.num_attention_heads = preset.heads;
  config.num_key_value_heads = preset.kv_heads;
  config.head_dim = preset.hidden_size / preset.heads;
  config.rms_norm_eps = preset.rms_norm_eps;
  config.rope_theta = preset.rope_theta;
  config.vocab_size = preset.vocab_size;
  config.tie_word_embeddings = true;
  config.hidden_act = "relu";
  config.dtype = "bfloat16";
  return config;
}

std::string layer_name(std::size_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<SafetensorsTensorSpec> tensor_specs(const ModelConfig& c) {
  const std::int64_t d = c.hidden_size, n = c.intermediate_size;
  const std::int64_t q_out = c.num_attention_heads * c.head_dim, kv_out = c.num_key_value_heads * c.head_dim;
  std::vector<SafetensorsTensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", "BF16", {c.vocab_size, d}});
  for (std::size_t l = 0; l < static_cast<std::size_t>(c.num_hidden_layers); ++l) {
    specs.push_back({layer_name(l, "input_layernorm.weight"), "BF16", {d}});
    specs.push_back({layer_name(l, "self_attn.q_proj.weight"), "BF16", {q_out, d}});
    specs.push_back({layer_name(l, "self_attn.k_proj.weight"), "BF16", {kv_out, d}});
    specs.push_back({layer_name(l, "self_attn.v_proj.weight"), "BF16", {kv_out, d}});
    specs.push_back({layer_name(l, "self_attn.o_proj.weight"), "BF16", {d, q_out}});
    specs.push_back({layer_name(l, "post_attention_layernorm.weight"), "BF16", {d}});
    specs.push_back({layer_name(l, "mlp.gate_proj.weight"), "BF16", {n, d}});
    specs.push_back({layer_name(l, "mlp.up_proj.weight"), "BF16", {n, d}});
    specs.push_back({layer_name(l, "mlp.down_proj.weight"), "BF16", {d, n}});
  }
  specs.push_back({"model.norm.weight", "BF16", {d}});
  return specs;
}

/// Appends fp32 values (bf16-exact) to the writer as bf16, a bounded chunk at a time.
void append_bf16(SafetensorsWriter& writer, std::span<const float> values) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<std::uint16_t> bits;
  for (std::size_t start = 0; start < values.size(); start += kChunk) {
    const std::size_t count = std::min(kChunk, values.size() - start);
    bits.resize(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = float_to_bf16_bits(values[start + i]);
    writer.append(std::as_bytes(std::span<const std::uint16_t>(bits)));
  }
}

void check_options(const GeneratorOptions& options, const GeneratorPreset& preset, double density) {
  if (!(density > 0.0 && density <= 0.5)) {
    throw Error(Error::Kind::InvalidInput, "density " + std::to_string(density) + " is outside (0, 0.5]");
  }
  if (!(options.dead_fraction >= 0.0 && options.dead_fraction < 0.95)) {
    throw Error(Error::Kind::InvalidInput,
                "dead fraction " + std::to_string(options.dead_fraction) + " is outside [0, 0.95)");
  }
  const double densest = density * (preset.layers > 1 ? 1.0 + kDensitySpread : 1.0);
  const double reachable = kMaxRate * (1.0 - options.dead_fraction);
  if (densest >= reachable) {
    throw Error(Error::Kind::InvalidInput, "density " + std::to_string(density) + " (first layer " +
                                               std::to_string(densest) + ") cannot be reached with " +
                                               std::to_string(options.dead_fraction) +
                                               " of the neurons dead");
  }
}

void prepare_directory(const std::filesystem::path& directory) {
  std::error_code error;
  if (std::filesystem::exists(directory, error)) {
    if (!std::filesystem::is_directory(directory, error)) {
      throw Error(Error::Kind::Io, directory.string() + " exists and is not a directory");
    }
    if (!std::filesystem::is_empty(directory, error)) {
      throw Error(Error::Kind::InvalidInput,
                  directory.string() + " is not empty; give gen-model a new or empty output directory");
    }
    return;
  }
  std::filesystem::create_directories(directory, error);
  if (error) throw Error(Error::Kind::Io, "cannot create " + directory.string() + ": " + error.message());
}

double fraction_positive(const Matrix& m) {
  std::uint64_t positive = 0;
  for (const float value : m.data) positive += value > 0.0f ? 1 : 0;
  return m.data.empty() ? 0.0 : static_cast<double>(positive) / static_cast<double>(m.data.size());
}

/// Generates layer `l`, calibrates its gate on `hidden` (the calibration tokens' residual stream
/// after layer l - 1), advances `hidden` through it and streams its tensors to `writer`.
GeneratedLayer generate_layer(std::size_t l, const ModelConfig& config,
                              const reference::AttentionGeometry& geometry, double target_density,
                              const GeneratorOptions& options, Matrix& hidden, std::size_t fit_tokens,
                              SafetensorsWriter& writer, unsigned threads) {
  const auto d = static_cast<std::size_t>(config.hidden_size);
  const auto n = static_cast<std::size_t>(config.intermediate_size);
  const std::size_t q_out = static_cast<std::size_t>(config.num_attention_heads * config.head_dim);
  const std::size_t kv_out = static_cast<std::size_t>(config.num_key_value_heads * config.head_dim);
  const std::uint64_t seed = options.seed;
  const std::size_t tokens = hidden.rows;

  reference::LayerWeights layer;
  layer.input_norm.assign(d, 1.0f);
  layer.q =
      generator::random_matrix(seed, layer_name(l, "self_attn.q_proj.weight"), q_out, d, kInitStd, threads);
  layer.k =
      generator::random_matrix(seed, layer_name(l, "self_attn.k_proj.weight"), kv_out, d, kInitStd, threads);
  layer.v =
      generator::random_matrix(seed, layer_name(l, "self_attn.v_proj.weight"), kv_out, d, kInitStd, threads);
  // down_proj gets the scaled init sigma / sqrt(2L); o_proj less (see kAttentionOutputGain).
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config.num_hidden_layers));
  const double attention_output_std =
      kAttentionOutputGain /
      (static_cast<double>(d) * std::sqrt(2.0 * static_cast<double>(config.num_hidden_layers)));
  layer.o = generator::random_matrix(seed, layer_name(l, "self_attn.o_proj.weight"), d, q_out,
                                     attention_output_std, threads);
  std::fill(layer.o.row(kBiasChannel).begin(), layer.o.row(kBiasChannel).end(), 0.0f);  // never writes h[u]
  reference::attention_block(hidden, layer, geometry, config.rms_norm_eps, nullptr, TraceTag{}, threads);

  // Scale the bias channel so x[u] averages kBiasInputScale at the FFN input; tokens with a large
  // residual norm get a smaller bias input, a natural per-token variation.
  double mean_rms = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    double sum = 0;
    for (const float value : hidden.row(t)) sum += static_cast<double>(value) * value;
    mean_rms += std::sqrt(sum / static_cast<double>(d) + config.rms_norm_eps);
  }
  mean_rms /= static_cast<double>(tokens);
  layer.post_attention_norm.assign(d, 1.0f);
  layer.post_attention_norm[kBiasChannel] =
      round_to_bf16(static_cast<float>(kBiasInputScale * mean_rms / static_cast<double>(kBiasChannelValue)));
  Matrix x;
  reference::rms_norm(hidden, layer.post_attention_norm, config.rms_norm_eps, x, threads);

  layer.gate = generator::random_matrix(seed, layer_name(l, "mlp.gate_proj.weight"), n, d, kInitStd, threads);
  layer.up = generator::random_matrix(seed, layer_name(l, "mlp.up_proj.weight"), n, d, kInitStd, threads);
  layer.down =
      generator::random_matrix(seed, layer_name(l, "mlp.down_proj.weight"), d, n, residual_std, threads);
  std::fill(layer.down.row(kBiasChannel).begin(), layer.down.row(kBiasChannel).end(), 0.0f);
  for (std::size_t j = 0; j < n; ++j) layer.gate.at(j, kBiasChannel) = 0.0f;

  // Neuron j fires iff beta_j > r_tj = -(w_j . x_t) / x_t[u]. The first `fit_tokens` tokens set
  // the quantiles; the others validate them, as tokens the model has never seen: the rates are
  // scaled by the one factor that makes the validation tokens fire at the target. That absorbs
  // what quantiles of a few hundred tokens get wrong in the tails and what earlier layers'
  // errors do to this layer's inputs.
  Matrix without_bias;
  reference::matmul_nt(x, layer.gate, without_bias, threads);
  Matrix thresholds(n, fit_tokens);
  for (std::size_t t = 0; t < fit_tokens; ++t) {
    const float bias_input = x.at(t, kBiasChannel);
    for (std::size_t j = 0; j < n; ++j) thresholds.at(j, t) = -without_bias.at(t, j) / bias_input;
  }
  generator::sort_rows(thresholds, threads);
  generator::RateOptions rate_options;
  rate_options.dead_fraction = options.dead_fraction;
  rate_options.log_sigma = kLogRateSigma;
  rate_options.max_rate = kMaxRate;
  std::vector<double> rates;
  std::vector<float> bias(n);
  auto calibrate = [&](double density) {
    rate_options.density = density;
    rates = generator::neuron_rates(n, rate_options, seed, l);
    bias = generator::calibrate_bias(thresholds, rates, threads);
    for (float& b : bias) b = round_to_bf16(b);
  };
  auto validation_density = [&] {
    std::uint64_t fired = 0;
    for (std::size_t t = fit_tokens; t < tokens; ++t) {
      const float bias_input = x.at(t, kBiasChannel);
      for (std::size_t j = 0; j < n; ++j)
        fired += without_bias.at(t, j) + bias[j] * bias_input > 0.0f ? 1 : 0;
    }
    return static_cast<double>(fired) / (static_cast<double>(tokens - fit_tokens) * static_cast<double>(n));
  };
  double scale = 1.0;
  if (fit_tokens < tokens) {
    // The validation density grows with the scale; bisect it in log space within what is reachable.
    const double reachable = kMaxRate * (1.0 - options.dead_fraction) * 0.999;
    double low = std::log(0.25), high = std::log(std::min(4.0, reachable / target_density));
    for (int iteration = 0; iteration < 24; ++iteration) {
      const double middle = 0.5 * (low + high);
      calibrate(target_density * std::exp(middle));
      (validation_density() < target_density ? low : high) = middle;
    }
    scale = std::exp(high);
  }
  calibrate(target_density * scale);
  GeneratedLayer result;
  result.target_density = target_density;
  result.rate_scale = scale;
  for (std::size_t j = 0; j < n; ++j) {
    layer.gate.at(j, kBiasChannel) = bias[j];
    result.dead_neurons += rates[j] == 0.0 ? 1 : 0;
  }

  // The layer's FFN as the CPU backend runs it: what it fires at is what this layer is.
  cpu::FfnLayerView view{&layer.gate, &layer.up, &layer.down, nullptr, Activation::Relu};
  Matrix gate_pre, activated, ffn_out;
  cpu::dense_gate_up(x, view, gate_pre, activated, threads);
  cpu::dense_down(activated, view, ffn_out, threads);
  result.calibrated_density = fraction_positive(gate_pre);
  for (std::size_t i = 0; i < hidden.data.size(); ++i) hidden.data[i] += ffn_out.data[i];

  append_bf16(writer, layer.input_norm);
  append_bf16(writer, layer.q.data);
  append_bf16(writer, layer.k.data);
  append_bf16(writer, layer.v.data);
  append_bf16(writer, layer.o.data);
  append_bf16(writer, layer.post_attention_norm);
  append_bf16(writer, layer.gate.data);
  append_bf16(writer, layer.up.data);
  append_bf16(writer, layer.down.data);
  return result;
}

nlohmann::json config_json(const ModelConfig& c, const GeneratorPreset& preset,
                           const GeneratorOptions& options, const GeneratedModel& model) {
  nlohmann::json target = nlohmann::json::array(), calibrated = nlohmann::json::array(),
                 dead = nlohmann::json::array(), scale = nlohmann::json::array();
  for (const auto& layer : model.layers) {
    target.push_back(layer.target_density);
    calibrated.push_back(layer.calibrated_density);
    dead.push_back(layer.dead_neurons);
    scale.push_back(layer.rate_scale);
  }
  nlohmann::json synthetic = {
      {"generator", std::string("twellscope ") + version()},
      {"generator_revision", kGeneratorRevision},
      {"construction",
       "bias channel 0, full-model quantile calibration on the CPU forward (docs MODELS.md 4.1 b)"},
      {"preset", preset.name},
      {"seed", options.seed},
      {"density", model.density},
      {"layer_target_density", target},
      {"layer_calibrated_density", calibrated},
      {"dead_fraction", options.dead_fraction},
      {"layer_dead_neurons", dead},
      {"layer_rate_scale", scale},
      {"rate_log_sigma", kLogRateSigma},
      {"rate_max", kMaxRate},
      {"bias_channel", kBiasChannel},
      {"calibration",
       {{"batch", preset.calibration_batch},
        {"fit_sequences", std::max(1u, preset.calibration_batch / 2)},
        {"sequence", preset.calibration_sequence},
        {"token_seed", model.calibration_token_seed}}}};
  return {{"architectures", {"SparseLlamaForCausalLM"}},
          {"model_type", c.model_type},
          {"hidden_act", c.hidden_act},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_key_value_heads},
          {"head_dim", c.head_dim},
          {"rms_norm_eps", c.rms_norm_eps},
          {"rope_theta", c.rope_theta},
          {"rope_scaling", nullptr},
          {"max_position_embeddings", 2048},
          {"vocab_size", c.vocab_size},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"bos_token_id", 0},
          {"eos_token_id", 0},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"initializer_range", kInitStd},
          {"dtype", c.dtype},
          {"torch_dtype", c.dtype},
          {"sparsity_gated_mlp", true},
          {"synthetic", synthetic}};
}

}  // namespace

const std::vector<GeneratorPreset>& generator_presets() {
  static const std::vector<GeneratorPreset> presets = make_presets();
  return presets;
}

const GeneratorPreset& generator_preset(const std::string& name) {
  std::string names;
  for (const auto& preset : generator_presets()) {
    if (preset.name == name) return preset;
    names += (names.empty() ? "" : ", ") + preset.name;
  }
  throw Error(Error::Kind::InvalidInput, "unknown preset '" + name + "' (presets: " + names + ")");
}

GeneratedModel generate_model(const GeneratorOptions& options, const std::filesystem::path& directory) {
  const GeneratorPreset& preset = generator_preset(options.preset);
  const double density = options.density.value_or(preset.default_density);
  check_options(options, preset, density);
  const unsigned threads = reference::detail::effective_threads(options.threads, ~std::size_t{0});
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  const ModelConfig config = config_of(preset);
  const auto d = static_cast<std::size_t>(config.hidden_size);
  GeneratedModel model;
  model.directory = directory;
  model.preset = preset.name;
  model.density = density;
  model.calibration_token_seed = detail::CounterRng(options.seed, "calibration-tokens").bits(0);
  const TokenBatch calibration =
      random_tokens(preset.calibration_batch, preset.calibration_sequence,
                    static_cast<std::uint32_t>(config.vocab_size), model.calibration_token_seed);
  const auto geometry = reference::attention_geometry(config, calibration.batch, calibration.sequence);
  const auto layer_density = generator::layer_density_profile(
      density, static_cast<std::size_t>(config.num_hidden_layers), kDensitySpread);

  prepare_directory(directory);
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"generator", std::string("twellscope ") + version()},
                                                       {"preset", preset.name},
                                                       {"seed", std::to_string(options.seed)}};
  SafetensorsWriter writer(directory / "model.safetensors", tensor_specs(config), metadata);

  const generator::EmbeddingRecipe embedding(options.seed, d, kBiasChannel, kBiasChannelValue, kInitStd,
                                             kTopics, kTopicWeight, kTokenScaleSigma);
  progress("embedding [" + std::to_string(config.vocab_size) + ", " + std::to_string(d) + "]");
  constexpr std::size_t kRowsPerChunk = 512;
  const auto vocab = static_cast<std::size_t>(config.vocab_size);
  Matrix rows(kRowsPerChunk, d);
  for (std::size_t first = 0; first < vocab; first += kRowsPerChunk) {
    const std::size_t count = std::min(kRowsPerChunk, vocab - first);
    reference::detail::parallel_for(count, threads, [&](std::size_t i, unsigned) {
      embedding.row(static_cast<std::int64_t>(first + i), rows.row(i).data());
    });
    append_bf16(writer, std::span<const float>(rows.data.data(), count * d));
  }

  // The first half of the calibration sequences fits the gates, the second half validates them.
  const std::size_t fit_tokens =
      static_cast<std::size_t>(std::max(1u, calibration.batch / 2)) * calibration.sequence;
  Matrix hidden(calibration.count(), d);
  for (std::size_t t = 0; t < calibration.count(); ++t)
    embedding.row(calibration.ids[t], hidden.row(t).data());
  for (std::size_t l = 0; l < static_cast<std::size_t>(config.num_hidden_layers); ++l) {
    model.layers.push_back(
        generate_layer(l, config, geometry, layer_density[l], options, hidden, fit_tokens, writer, threads));
    const auto& layer = model.layers.back();
    progress("layer " + std::to_string(l + 1) + "/" + std::to_string(config.num_hidden_layers) +
             ": target density " + std::to_string(layer.target_density) + ", calibrated " +
             std::to_string(layer.calibrated_density) + ", " + std::to_string(layer.dead_neurons) + " dead");
  }
  append_bf16(writer, std::vector<float>(d, 1.0f));
  writer.finish();

  write_file_atomically(directory / "config.json",
                        config_json(config, preset, options, model).dump(2) + "\n");
  std::error_code error;
  for (const char* name : {"model.safetensors", "config.json"})
    model.bytes_written += std::filesystem::file_size(directory / name, error);
  return model;
}

}  // namespace twell
