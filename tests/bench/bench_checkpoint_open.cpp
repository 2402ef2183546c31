// SPDX-License-Identifier: GPL-3.0-or-later
// How long Checkpoint::open takes on a SparseLM-2B-shaped checkpoint (target: under 1 s; it maps
// the file and reads only the header).
//
//   bench_checkpoint_open --create DIR [--layers L]   write config.json + a 2B-shaped model.safetensors
//                                                     (random bf16, streamed; about 4.1 GB at 38 layers)
//   bench_checkpoint_open DIR [--repeat N]            time open + role mapping, and one layer's fp32 read
//
// The weights are random bytes, not a calibrated model: this measures I/O and validation only.
// Use twellscope-cli gen-model for a checkpoint that is also worth profiling.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kHidden = 2048, kIntermediate = 5632, kHeads = 32, kVocab = 49152;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Small random bf16 values (|x| < 2^-3), never NaN: sign, exponent 0x78..0x7b, random mantissa.
void fill_random_bf16(std::vector<std::uint16_t>& out, std::uint64_t& state) {
  for (std::size_t i = 0; i < out.size(); i += 4) {
    const std::uint64_t bits = splitmix64(state);
    for (std::size_t j = 0; j < 4 && i + j < out.size(); ++j) {
      const auto word = static_cast<std::uint16_t>(bits >> (16 * j));
      out[i + j] = static_cast<std::uint16_t>((word & 0x807fu) | (0x3c00u + ((word >> 7) & 0x3u) * 0x80u));
    }
  }
}

void create(const fs::path& directory, std::int64_t layers) {
  fs::create_directories(directory);
  const nlohmann::json config = {{"architectures", {"SparseLlamaForCausalLM"}},
                                 {"model_type", "llama_sparse_relu"},
                                 {"dtype", "bfloat16"},
                                 {"hidden_size", kHidden},
                                 {"intermediate_size", kIntermediate},
                                 {"num_hidden_layers", layers},
                                 {"num_attention_heads", kHeads},
                                 {"num_key_value_heads", kHeads},
                                 {"head_dim", kHidden / kHeads},
                                 {"hidden_act", "silu"},
                                 {"rms_norm_eps", 1e-5},
                                 {"rope_theta", 100000},
                                 {"vocab_size", kVocab},
                                 {"tie_word_embeddings", true}};
  std::ofstream(directory / "config.json") << config.dump(2) << "\n";

  std::vector<twell::SafetensorsTensorSpec> specs{{"model.embed_tokens.weight", "BF16", {kVocab, kHidden}}};
  for (std::int64_t i = 0; i < layers; ++i) {
    const std::string base = "model.layers." + std::to_string(i) + ".";
    specs.push_back({base + "input_layernorm.weight", "BF16", {kHidden}});
    for (const char* projection : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      specs.push_back({base + "self_attn." + projection + ".weight", "BF16", {kHidden, kHidden}});
    }
    specs.push_back({base + "post_attention_layernorm.weight", "BF16", {kHidden}});
    specs.push_back({base + "mlp.gate_proj.weight", "BF16", {kIntermediate, kHidden}});
    specs.push_back({base + "mlp.up_proj.weight", "BF16", {kIntermediate, kHidden}});
    specs.push_back({base + "mlp.down_proj.weight", "BF16", {kHidden, kIntermediate}});
  }
  specs.push_back({"model.norm.weight", "BF16", {kHidden}});

  const auto start = Clock::now();
  twell::SafetensorsWriter writer(directory / "model.safetensors", specs, {{"format", "pt"}});
  std::vector<std::uint16_t> chunk(std::size_t{4} << 20);  // 8 MB of bf16
  std::uint64_t state = 2603;
  std::uint64_t written = 0;
  while (writer.current_tensor() < specs.size()) {
    const auto count = static_cast<std::size_t>(
        std::min<std::uint64_t>(chunk.size(), writer.remaining_in_current_tensor() / sizeof(std::uint16_t)));
    fill_random_bf16(chunk, state);
    writer.append(std::as_bytes(std::span(chunk.data(), count)));
    written += count * sizeof(std::uint16_t);
  }
  writer.finish();
  std::printf("wrote %s: %zu tensors, %.2f GB in %.1f s\n", (directory / "model.safetensors").c_str(),
              specs.size(), static_cast<double>(written) / 1e9, seconds_since(start));
}

void time_open(const fs::path& directory, int repeat) {
  std::vector<double> open_seconds;
  std::uint64_t parameters = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    const auto checkpoint = twell::Checkpoint::open(directory);
    open_seconds.push_back(seconds_since(start));
    parameters = checkpoint.parameter_count();
  }
  const double first = open_seconds.front();
  std::sort(open_seconds.begin(), open_seconds.end());
  std::printf("Checkpoint::open(%s): %llu parameters\n", directory.c_str(),
              static_cast<unsigned long long>(parameters));
  std::printf("  open + view: first %.1f ms, min %.1f ms, median %.1f ms over %d runs\n", first * 1e3,
              open_seconds.front() * 1e3, open_seconds[open_seconds.size() / 2] * 1e3, repeat);

  // For scale: reading one FFN layer's three matrices to fp32 touches 69 MB of the mapping.
  const auto checkpoint = twell::Checkpoint::open(directory);
  const auto start = Clock::now();
  const auto& layer = checkpoint.layer(checkpoint.layer_count() / 2);
  std::size_t values = 0;
  for (const auto* role : {&layer.gate, &layer.up, &layer.down})
    values += role->to_linear_matrix().data.size();
  std::printf("  one layer's gate/up/down to fp32 (nn.Linear layout): %.1f ms (%zu values)\n",
              seconds_since(start) * 1e3, values);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"Opening a SparseLM-2B-shaped checkpoint and building its view"};
    std::string create_directory, open_directory;
    long layers = 38, repeat = 5;
    app.add_option("--create", create_directory, "write a synthetic checkpoint into DIR and stop");
    app.add_option("--layers", layers, "layers of the synthetic checkpoint")->check(CLI::PositiveNumber);
    app.add_option("directory", open_directory, "checkpoint to open and time");
    app.add_option("--repeat", repeat, "timed opens")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    if (create_directory.empty() == open_directory.empty()) {
      std::fprintf(stderr, "%s: give either --create DIR or a checkpoint DIR to open\n", argv[0]);
      return 2;
    }
    if (!create_directory.empty())
      create(create_directory, layers);
    else
      time_open(open_directory, static_cast<int>(repeat));
    return 0;
  } catch (const twell::Error& e) {
    std::fprintf(stderr, "bench_checkpoint_open: %s\n", e.what());
    return twell::exit_code_for(e.kind());
  }
}
