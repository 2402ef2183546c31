// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli inspect DIR`: what twellscope sees in a checkpoint before running anything.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"

namespace twell::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string millions(std::uint64_t count) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f M", static_cast<double>(count) / 1e6);
  return text;
}

std::uint64_t elements(const RoleTensor& role) {
  return role.view == nullptr ? 0 : static_cast<std::uint64_t>(role.view->element_count());
}

// "BF16", or "BF16 (410), F32 (2)" when tensors differ.
std::string dtype_summary(const Checkpoint& checkpoint) {
  std::map<std::string, std::size_t> counts;
  for (const auto& view : checkpoint.tensors()) ++counts[to_string(view.dtype)];
  std::string text;
  for (const auto& [dtype, count] : counts) {
    if (!text.empty()) text += ", ";
    text += counts.size() == 1 ? dtype : dtype + " (" + std::to_string(count) + " tensors)";
  }
  return text;
}

void print_role(int name_width, const char* layer, TensorRole role, const RoleTensor& tensor) {
  if (tensor.view == nullptr) return;
  std::printf("  %-5s %-19s %-*s %-5s %-14s %s\n", layer, to_string(role), name_width,
              tensor.view->name.c_str(), to_string(tensor.view->dtype),
              shape_text(tensor.view->shape).c_str(), tensor.transposed ? "yes" : "no");
}

void print_checkpoint(const Checkpoint& checkpoint) {
  const auto& config = checkpoint.config();
  const std::string architecture =
      config.architectures.empty() ? "" : " (" + config.architectures.front() + ")";
  std::printf("Checkpoint    %s\n", checkpoint.directory().string().c_str());
  std::printf("Architecture  %s%s\n", config.model_type.c_str(), architecture.c_str());
  std::printf(
      "  hidden_size %lld, intermediate_size %lld, layers %lld, heads %lld (kv %lld, head_dim %lld), vocab "
      "%lld\n",
      static_cast<long long>(config.hidden_size), static_cast<long long>(config.intermediate_size),
      static_cast<long long>(config.num_hidden_layers), static_cast<long long>(config.num_attention_heads),
      static_cast<long long>(config.num_key_value_heads), static_cast<long long>(config.head_dim),
      static_cast<long long>(config.vocab_size));
  std::printf("  rms_norm_eps %g, rope_theta %g, rope_scaling %s\n", config.rms_norm_eps, config.rope_theta,
              config.rope_scaling ? config.rope_scaling->c_str() : "none");
  std::printf("Weights       ");
  const auto files = checkpoint.weight_files();
  for (std::size_t i = 0; i < files.size(); ++i)
    std::printf("%s%s", i ? ", " : "", files[i].filename().c_str());
  std::printf("\nDtype         %s (config.json says %s)\n", dtype_summary(checkpoint).c_str(),
              config.dtype.empty() ? "nothing" : config.dtype.c_str());
  std::printf("Activation    %s: %s\n", to_string(checkpoint.activation().activation),
              checkpoint.activation().reason.c_str());

  std::uint64_t attention = 0, ffn = 0, norms = 0;
  for (std::size_t i = 0; i < checkpoint.layer_count(); ++i) {
    const auto& layer = checkpoint.layer(i);
    attention += elements(layer.q) + elements(layer.k) + elements(layer.v) + elements(layer.o);
    ffn += elements(layer.gate) + elements(layer.up) + elements(layer.down);
    norms += elements(layer.input_norm) + elements(layer.post_attention_norm);
  }
  std::printf("Parameters    %llu (%s)\n", static_cast<unsigned long long>(checkpoint.parameter_count()),
              millions(checkpoint.parameter_count()).c_str());
  std::printf(
      "  embedding %s, attention %s, FFN %s, norms %s, lm_head %s\n",
      millions(elements(checkpoint.embedding())).c_str(), millions(attention).c_str(), millions(ffn).c_str(),
      millions(norms + elements(checkpoint.final_norm())).c_str(),
      checkpoint.lm_head_tied() ? "tied to the embedding" : millions(elements(checkpoint.lm_head())).c_str());

  std::printf("\nTensors (transposed: stored as the transpose of nn.Linear [out, in])\n");
  int name_width = 4;
  for (const auto& view : checkpoint.tensors())
    name_width = std::max(name_width, static_cast<int>(view.name.size()));
  std::printf("  %-5s %-19s %-*s %-5s %-14s %s\n", "layer", "role", name_width, "name", "dtype", "shape",
              "transposed");
  print_role(name_width, "-", TensorRole::Embedding, checkpoint.embedding());
  for (std::size_t i = 0; i < checkpoint.layer_count(); ++i) {
    const auto& layer = checkpoint.layer(i);
    const std::string index = std::to_string(i);
    const char* l = index.c_str();
    print_role(name_width, l, TensorRole::InputNorm, layer.input_norm);
    print_role(name_width, l, TensorRole::AttnQ, layer.q);
    print_role(name_width, l, TensorRole::AttnK, layer.k);
    print_role(name_width, l, TensorRole::AttnV, layer.v);
    print_role(name_width, l, TensorRole::AttnO, layer.o);
    print_role(name_width, l, TensorRole::PostAttentionNorm, layer.post_attention_norm);
    print_role(name_width, l, TensorRole::FfnGate, layer.gate);
    print_role(name_width, l, TensorRole::FfnUp, layer.up);
    print_role(name_width, l, TensorRole::FfnDown, layer.down);
  }
  print_role(name_width, "-", TensorRole::FinalNorm, checkpoint.final_norm());
  if (!checkpoint.lm_head_tied()) print_role(name_width, "-", TensorRole::LmHead, checkpoint.lm_head());

  if (!checkpoint.unused_tensors().empty()) {
    std::printf("\nUnused tensors (%zu, ignored)\n", checkpoint.unused_tensors().size());
    for (const auto& name : checkpoint.unused_tensors()) std::printf("  %s\n", name.c_str());
  }
  for (const auto& warning : checkpoint.warnings()) std::printf("warning: %s\n", warning.c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Arguments {
    std::string directory;
    std::string activation;
  };
  auto arguments = std::make_shared<Arguments>();
  auto* command = app.add_subcommand("inspect",
                                     "Show a checkpoint's architecture, parameters, dtype, FFN "
                                     "activation (and why) and a per-layer tensor table");
  command->add_option("DIR", arguments->directory, "Hugging Face checkpoint directory")->required();
  command->add_option("--activation", arguments->activation, "Override the FFN activation")
      ->check(CLI::IsMember({"relu", "silu"}));
  command->callback([arguments] {
    Checkpoint::Options options;
    if (!arguments->activation.empty())
      options.activation_override = activation_from_string(arguments->activation);
    print_checkpoint(Checkpoint::open(arguments->directory, options));
  });
}

}  // namespace twell::cli
