// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "twell/backend.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/model_generator.hpp"
#include "twell/version.hpp"

namespace {

namespace fs = std::filesystem;

fs::path generate(const fs::path& directory, std::uint64_t seed, double dead = 0.03, unsigned threads = 2) {
  twell::GeneratorOptions options;
  options.preset = "tiny";
  options.seed = seed;
  options.dead_fraction = dead;
  options.threads = threads;
  twell::generate_model(options, directory);
  return directory;
}

/// The suite's shared model: tiny, seed 2, default density and dead fraction, 2 threads.
const fs::path& shared_tiny() {
  static twell::test::TempDir dir("twellscope-generator");
  static const fs::path path = generate(dir.path() / "tiny", 2);
  return path;
}

nlohmann::json synthetic_block(const fs::path& model) {
  return nlohmann::json::parse(twell::test::read_file(model / "config.json")).at("synthetic");
}

/// Per-layer densities and never-firing neuron counts of the CPU forward on `tokens`.
struct Measured {
  std::vector<double> density;
  std::vector<std::uint32_t> never_fired;
};
Measured measure(const fs::path& model, const twell::TokenBatch& tokens) {
  auto backend = twell::make_cpu_backend(2);
  backend->load(twell::Checkpoint::open(model));
  twell::ForwardOptions options;
  options.capture_statistics = true;
  const auto result = backend->forward(tokens, options, nullptr, {}, {});
  Measured measured;
  for (const auto& layer : result.layers) {
    std::uint64_t fired = 0;
    std::uint32_t never = 0;
    for (const auto count : layer.summary.neuron_fire_counts) {
      fired += count;
      never += count == 0 ? 1 : 0;
    }
    measured.density.push_back(static_cast<double>(fired) /
                               (double(layer.summary.tokens) * layer.summary.neurons));
    measured.never_fired.push_back(never);
  }
  return measured;
}

TEST(ModelGenerator, SameSeedSameBytesWhateverTheThreadCount) {
  twell::test::TempDir dir;
  const auto& a = shared_tiny();
  const auto b = generate(dir.path() / "b", 2, 0.03, 1);
  const auto c = generate(dir.path() / "c", 6);
  const auto bytes_a = twell::test::read_file(a / "model.safetensors");
  EXPECT_GT(bytes_a.size(), 3'000'000u);
  EXPECT_LT(bytes_a.size(), 5'000'000u);
  EXPECT_TRUE(bytes_a == twell::test::read_file(b / "model.safetensors"));
  EXPECT_EQ(twell::test::read_file(a / "config.json"), twell::test::read_file(b / "config.json"));
  EXPECT_FALSE(bytes_a == twell::test::read_file(c / "model.safetensors"));
}

TEST(ModelGenerator, WritesALoadableSparseLmCheckpoint) {
  const auto& model = shared_tiny();
  const auto checkpoint = twell::Checkpoint::open(model);
  const auto& config = checkpoint.config();
  EXPECT_EQ(config.model_type, "llama_sparse_relu");
  EXPECT_EQ(config.hidden_size, 256);
  EXPECT_EQ(config.intermediate_size, 768);
  EXPECT_EQ(config.num_hidden_layers, 2);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(checkpoint.activation().activation, twell::Activation::Relu);
  EXPECT_TRUE(checkpoint.lm_head_tied());
  EXPECT_EQ(checkpoint.tensors().size(), 1u + 9u * 2u + 1u);
  for (const auto& tensor : checkpoint.tensors()) EXPECT_EQ(tensor.dtype, twell::DType::BF16) << tensor.name;
  EXPECT_TRUE(checkpoint.unused_tensors().empty());

  const auto synthetic = synthetic_block(model);
  EXPECT_EQ(synthetic.at("preset"), "tiny");
  EXPECT_EQ(synthetic.at("seed"), 2);
  EXPECT_DOUBLE_EQ(synthetic.at("density").get<double>(), 0.02);
  const auto targets = synthetic.at("layer_target_density").get<std::vector<double>>();
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_GT(targets[0], targets[1]);  // earlier layers denser
  EXPECT_NEAR((targets[0] + targets[1]) / 2, 0.02, 1e-12);
  EXPECT_EQ(synthetic.at("layer_dead_neurons").get<std::vector<int>>(),
            (std::vector<int>{23, 23}));  // 3 % of 768
}

TEST(ModelGenerator, CpuForwardFiresAtTheTargetDensity) {
  const auto& model = shared_tiny();
  const auto synthetic = synthetic_block(model);
  const auto targets = synthetic.at("layer_target_density").get<std::vector<double>>();
  const auto calibrated = synthetic.at("layer_calibrated_density").get<std::vector<double>>();

  // On the calibration tokens the CPU forward reproduces the recorded densities exactly.
  const auto& calibration = synthetic.at("calibration");
  const auto calibration_tokens = twell::random_tokens(calibration.at("batch"), calibration.at("sequence"),
                                                       512, calibration.at("token_seed"));
  const auto on_calibration = measure(model, calibration_tokens);
  // On held-out tokens it is near the target.
  const auto held_out = measure(model, twell::random_tokens(4, 256, 512, 987654321));
  double mean = 0;
  for (std::size_t l = 0; l < 2; ++l) {
    EXPECT_DOUBLE_EQ(on_calibration.density[l], calibrated[l]) << "layer " << l;
    EXPECT_NEAR(calibrated[l], targets[l], 0.1 * targets[l]) << "layer " << l;
    EXPECT_NEAR(held_out.density[l], targets[l], 0.3 * targets[l]) << "layer " << l;
    mean += held_out.density[l] / 2;
  }
  EXPECT_NEAR(mean, 0.02, 0.3 * 0.02);
}

TEST(ModelGenerator, DeadNeuronsNeverFire) {
  twell::test::TempDir dir;
  const auto none = measure(generate(dir.path() / "none", 3, 0.0), twell::random_tokens(4, 256, 512, 77));
  const auto fifth = measure(generate(dir.path() / "fifth", 3, 0.2), twell::random_tokens(4, 256, 512, 77));
  const std::uint32_t dead = 154;  // round(0.2 * 768)
  for (std::size_t l = 0; l < 2; ++l) {
    EXPECT_GE(fifth.never_fired[l], dead) << "layer " << l;
    // Besides the dead ones, only rare neurons stay silent on 1024 tokens, as many as without dead ones.
    EXPECT_LE(fifth.never_fired[l], dead + none.never_fired[l] + 40) << "layer " << l;
  }
}

TEST(ModelGenerator, RejectsBadOptions) {
  twell::test::TempDir dir;
  twell::GeneratorOptions options;
  options.preset = "huge";
  try {
    twell::generate_model(options, dir.path() / "x");
    ADD_FAILURE() << "unknown preset accepted";
  } catch (const twell::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sparselm-2b"), std::string::npos) << e.what();  // lists presets
  }
  options.preset = "tiny";
  for (const double density : {0.0, -0.1, 0.6}) {
    options.density = density;
    EXPECT_THROW(twell::generate_model(options, dir.path() / "x"), twell::Error) << density;
  }
  options.density = 0.4;
  options.dead_fraction = 0.5;  // first layer 0.56 > 0.9 * 0.5
  EXPECT_THROW(twell::generate_model(options, dir.path() / "x"), twell::Error);
  EXPECT_FALSE(fs::exists(dir.path() / "x"));  // options are checked before anything is written

  options = {};
  fs::create_directories(dir.path() / "busy");
  twell::test::write_file(dir.path() / "busy" / "keep.txt", "mine");
  EXPECT_THROW(twell::generate_model(options, dir.path() / "busy"), twell::Error);
  EXPECT_EQ(twell::test::read_file(dir.path() / "busy" / "keep.txt"), "mine");
}

TEST(ModelGenerator, PresetsHaveTheSparseLmShapes) {
  const std::vector<std::pair<std::string, std::int64_t>> layers = {
      {"sparselm-0.5b", 8}, {"sparselm-1b", 18}, {"sparselm-1.5b", 28}, {"sparselm-2b", 38}};
  for (const auto& [name, count] : layers) {
    const auto& preset = twell::generator_preset(name);
    EXPECT_EQ(preset.hidden_size, 2048);
    EXPECT_EQ(preset.intermediate_size, 5632);
    EXPECT_EQ(preset.heads, 32);
    EXPECT_EQ(preset.kv_heads, 32);
    EXPECT_EQ(preset.vocab_size, 49152);
    EXPECT_EQ(preset.layers, count);
  }
  const auto demo = twell::generator_preset("demo");
  EXPECT_GE(demo.hidden_size, 512);
  EXPECT_EQ(demo.intermediate_size % 256, 0);
}

TEST(ModelGenerator, DemoModelLivesInTheVersionedCache) {
  const char* previous = std::getenv("XDG_CACHE_HOME");
  const std::string saved = previous ? previous : "";
  ::setenv("XDG_CACHE_HOME", "/some/cache", 1);
  const auto directory = twell::demo_model_directory();
  if (previous) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
  EXPECT_EQ(directory.parent_path(), fs::path("/some/cache/twellscope"));
  EXPECT_NE(directory.filename().string().find(std::string("demo-") + twell::version()), std::string::npos);
}

TEST(ModelGenerator, EnsureGeneratedModelGeneratesOnceAndLeavesNoStaging) {
  twell::test::TempDir cache;
  twell::GeneratorOptions options;  // the tiny preset stands in for the demo (same code, faster)
  const auto target = cache.path() / "demo-x";
  const auto first = twell::ensure_generated_model(options, target);
  EXPECT_EQ(first, target);
  const auto written = fs::last_write_time(first / "model.safetensors");
  options.seed = 99;  // would give other bytes if it regenerated
  const auto second = twell::ensure_generated_model(options, target);
  EXPECT_EQ(second, target);
  EXPECT_EQ(fs::last_write_time(second / "model.safetensors"), written);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(cache.path())) ++entries;
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(synthetic_block(target).at("seed"), 0);
}

TEST(GenModelCli, WritesAModelAndRejectsBadArguments) {
  twell::test::TempDir dir;
  const std::string cli = TWELLSCOPE_CLI_PATH;
  const auto out = dir.path() / "cli-model";
  const auto ok = twell::test::run_command(
      cli + " gen-model --preset tiny --density 0.03 --dead 0.1 --seed 9 --out " + out.string());
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("calibrated"), std::string::npos) << ok.output;
  const auto synthetic = synthetic_block(out);
  EXPECT_EQ(synthetic.at("seed"), 9);
  EXPECT_DOUBLE_EQ(synthetic.at("density").get<double>(), 0.03);
  EXPECT_DOUBLE_EQ(synthetic.at("dead_fraction").get<double>(), 0.1);

  const auto again = twell::test::run_command(cli + " gen-model --preset tiny --out " + out.string());
  EXPECT_EQ(again.exit_code, 3) << again.output;  // the directory is not empty
  EXPECT_NE(again.output.find("not empty"), std::string::npos) << again.output;
  const auto no_out = twell::test::run_command(cli + " gen-model --preset tiny");
  EXPECT_EQ(no_out.exit_code, 2) << no_out.output;
  const auto bad_preset =
      twell::test::run_command(cli + " gen-model --preset huge --out " + (dir.path() / "y").string());
  EXPECT_EQ(bad_preset.exit_code, 2) << bad_preset.output;
  const auto bad_density = twell::test::run_command(cli + " gen-model --preset tiny --density 0.9 --out " +
                                                    (dir.path() / "z").string());
  EXPECT_EQ(bad_density.exit_code, 3) << bad_density.output;
  EXPECT_NE(bad_density.output.find("density"), std::string::npos) << bad_density.output;
  const auto not_a_number = twell::test::run_command(cli + " gen-model --preset tiny --density lots --out " +
                                                     (dir.path() / "w").string());
  EXPECT_EQ(not_a_number.exit_code, 2) << not_a_number.output;
}

}  // namespace
