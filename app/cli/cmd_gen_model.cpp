// SPDX-License-Identifier: GPL-3.0-or-later
// twellscope-cli gen-model: writes a synthetic activation-sparse checkpoint (docs MODELS.md §4).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "twell/model_generator.hpp"

namespace twell::cli {
namespace {

struct GenModelArguments {
  std::string preset;
  std::optional<double> density;
  double dead_fraction = 0.03;
  std::uint64_t seed = 0;
  unsigned threads = 0;
  std::string out;
  bool quiet = false;
};

void run_gen_model(const GenModelArguments& arguments) {
  GeneratorOptions options;
  options.preset = arguments.preset;
  options.density = arguments.density;
  options.dead_fraction = arguments.dead_fraction;
  options.seed = arguments.seed;
  options.threads = arguments.threads;
  if (!arguments.quiet) {
    options.progress = [](const std::string& line) { std::fprintf(stderr, "gen-model: %s\n", line.c_str()); };
  }
  const auto start = std::chrono::steady_clock::now();
  const GeneratedModel model = generate_model(options, arguments.out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Wrote %s (preset %s, seed %llu, %.1f MB in %.1f s)\n", model.directory.string().c_str(),
              model.preset.c_str(), static_cast<unsigned long long>(arguments.seed),
              static_cast<double>(model.bytes_written) / 1e6, seconds);
  std::printf("layer  target density  calibrated density  dead neurons\n");
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const auto& layer = model.layers[l];
    std::printf("%5zu  %13.4f%%  %17.4f%%  %12u\n", l, 100.0 * layer.target_density,
                100.0 * layer.calibrated_density, layer.dead_neurons);
  }
}

}  // namespace

void add_gen_model_command(CLI::App& app) {
  auto arguments = std::make_shared<GenModelArguments>();
  auto* command = app.add_subcommand(
      "gen-model",
      "Write a synthetic activation-sparse Llama checkpoint (config.json + bf16 model.safetensors)");
  std::vector<std::string> names;
  std::string listing;
  for (const auto& preset : generator_presets()) {
    names.push_back(preset.name);
    listing += "\n  " + preset.name + ": " + preset.description;
  }
  command->add_option("--preset", arguments->preset, "Model shape:" + listing)
      ->required()
      ->check(CLI::IsMember(names));
  command->add_option("--density", arguments->density,
                      "Mean FFN activation density over layers, in (0, 0.5] (default: the preset's; earlier "
                      "layers get more, later ones less)");
  command->add_option("--dead", arguments->dead_fraction, "Fraction of each layer's neurons that never fire")
      ->capture_default_str();
  command->add_option("--seed", arguments->seed, "Seed: the same seed gives the same bytes")
      ->capture_default_str();
  command->add_option("--threads", arguments->threads, "CPU threads (0: all)")->capture_default_str();
  command->add_option("--out", arguments->out, "Output directory (created; must be new or empty)")
      ->required();
  command->add_flag("--quiet", arguments->quiet, "No progress lines on stderr");
  command->callback([arguments] { run_gen_model(*arguments); });
}

}  // namespace twell::cli
