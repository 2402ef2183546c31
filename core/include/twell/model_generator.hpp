// SPDX-License-Identifier: GPL-3.0-or-later
// Synthetic activation-sparse Llama checkpoints (docs MODELS.md §4): a real config.json +
// model.safetensors (bf16, SparseLM layout) whose ReLU-gated FFNs fire at a chosen per-layer
// density. One residual channel is a constant "bias channel"; each gate row's weight on it is
// calibrated layer by layer on the real CPU forward over seeded calibration token sequences (the
// full-model mode, §4.1 b): half the sequences set per-neuron quantiles so every neuron fires at
// its drawn rate (lognormal across neurons, a fraction dead), the other half validate them as
// unseen tokens and rescale the rates until they fire at the layer's target. Deterministic from
// the seed: every weight comes from a counter-based RNG keyed by the tensor name, and no result
// depends on the thread count.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace twell {

/// Bumped whenever the construction changes the bytes a seed produces.
inline constexpr int kGeneratorRevision = 1;

struct GeneratorPreset {
  std::string name;
  std::string description;
  std::int64_t hidden_size = 0, intermediate_size = 0, layers = 0;
  std::int64_t heads = 0, kv_heads = 0, vocab_size = 0;
  double rope_theta = 1e5;
  double rms_norm_eps = 1e-5;
  double default_density = 0.02;
  /// Calibration tokens (batch x sequence, seeded random ids). Large presets use few, so that
  /// calibrating a 2B model on two CPU cores stays a matter of minutes.
  std::uint32_t calibration_batch = 4, calibration_sequence = 256;
};

/// tiny, demo, sparselm-0.5b, sparselm-1b, sparselm-1.5b, sparselm-2b.
const std::vector<GeneratorPreset>& generator_presets();
/// Throws twell::Error (InvalidInput) listing the preset names when `name` is not one.
const GeneratorPreset& generator_preset(const std::string& name);

struct GeneratorOptions {
  std::string preset = "tiny";
  std::optional<double> density;  ///< mean FFN density over layers; the preset's default if unset
  double dead_fraction = 0.03;    ///< fraction of each layer's neurons that never fire
  std::uint64_t seed = 0;
  unsigned threads = 0;  ///< 0: every hardware thread (the bytes do not depend on it)
  std::function<void(const std::string&)> progress;  ///< one line per step, optional
};

struct GeneratedLayer {
  double target_density = 0;      ///< this layer's point on the density profile
  double calibrated_density = 0;  ///< what the CPU forward fires at on the calibration tokens
  std::uint32_t dead_neurons = 0;
  double rate_scale = 1;  ///< factor on the drawn rates that the validation tokens asked for
};

struct GeneratedModel {
  std::filesystem::path directory;
  std::string preset;
  double density = 0;  ///< the mean target
  std::vector<GeneratedLayer> layers;
  std::uint64_t calibration_token_seed = 0;
  std::uint64_t bytes_written = 0;
};

/// Writes config.json and model.safetensors into `directory` (created if missing; it must not
/// hold files already). Streams layer by layer: at most one layer's weights are in memory.
/// Throws twell::Error on bad options (InvalidInput) or file system failures (Io).
GeneratedModel generate_model(const GeneratorOptions& options, const std::filesystem::path& directory);

/// Where the built-in demo model lives: $XDG_CACHE_HOME/twellscope/demo-<version> (or
/// ~/.cache/twellscope/...; the system temp dir when neither is set).
std::filesystem::path demo_model_directory();
/// Returns `directory` once it holds a complete model, generating `options` into it only when it
/// does not: through a staging directory renamed into place, so concurrent callers and interrupted
/// runs never see a half-written model.
std::filesystem::path ensure_generated_model(const GeneratorOptions& options,
                                             const std::filesystem::path& directory);
/// The demo preset (default density and seed), generated on first use into demo_model_directory().
std::filesystem::path ensure_demo_model(const std::function<void(const std::string&)>& progress = {});

}  // namespace twell
