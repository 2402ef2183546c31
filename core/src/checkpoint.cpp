// SPDX-License-Identifier: GPL-3.0-or-later
// Maps the tensors of a Hugging Face Llama-style checkpoint to their roles. Orientation comes from
// shapes: several tools store FFN matrices transposed under other names (MODELS.md §1.3), and a
// name alone is only trusted when the shape cannot tell (a square matrix).
#include "twell/checkpoint.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "twell/error.hpp"
#include "weight_files.hpp"

namespace twell {
namespace {

namespace fs = std::filesystem;

std::string format_shape(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// One accepted spelling of a weight and how it is stored when its shape is square.
struct Spelling {
  const char* suffix;
  bool stored_transposed;
};

constexpr std::size_t kMissingNamesShown = 12;

struct CheckpointData {
  fs::path directory;
  ModelConfig config;
  ActivationChoice activation;
  WeightFiles weights;
  std::vector<TensorView> tensors;
  std::map<std::string, std::size_t> index_by_name;
  RoleTensor embedding, final_norm, lm_head;
  bool lm_head_tied = false;
  std::vector<LayerTensors> layers;
  std::set<std::string> used;
  std::vector<std::string> unused;
  std::uint64_t parameters = 0;
  std::vector<std::string> warnings;
};

class RoleResolver {
 public:
  explicit RoleResolver(CheckpointData& impl) : m_impl(impl) {
    // Base-model saves (LlamaModel rather than LlamaForCausalLM) drop the "model." prefix.
    const bool bare = impl.weights.by_name.count("embed_tokens.weight") != 0 &&
                      impl.weights.by_name.count("model.embed_tokens.weight") == 0;
    m_prefix = bare ? "" : "model.";
  }

  const std::string& prefix() const { return m_prefix; }
  const std::vector<std::string>& missing() const { return m_missing; }

  bool present(const std::string& name) const { return m_impl.weights.by_name.count(name) != 0; }

  // A matrix whose nn.Linear layout is [out, in].
  RoleTensor linear(const std::string& base, std::initializer_list<Spelling> spellings, std::int64_t out,
                    std::int64_t in, const std::string& what) {
    const Spelling* found = nullptr;
    std::string found_name;
    for (const auto& spelling : spellings) {
      const std::string name = base + spelling.suffix;
      if (!present(name)) continue;
      if (found != nullptr) fail("both '" + found_name + "' and '" + name + "' are present for " + what);
      found = &spelling;
      found_name = name;
    }
    if (found == nullptr) {
      m_missing.push_back(base + spellings.begin()->suffix);
      return {};
    }
    const TensorView* view = use(found_name);
    const auto& shape = view->shape;
    const std::vector<std::int64_t> linear_shape{out, in}, transposed_shape{in, out};
    RoleTensor role{view, false};
    if (shape == linear_shape && shape == transposed_shape) {
      role.transposed = found->stored_transposed;
    } else if (shape == linear_shape) {
      role.transposed = false;
    } else if (shape == transposed_shape) {
      role.transposed = true;
    } else {
      fail("tensor '" + found_name + "' has shape " + format_shape(shape) + ", but " + what + " must be " +
           format_shape(linear_shape) + " or its transpose");
    }
    return role;
  }

  RoleTensor vector(const std::string& name, std::int64_t length, const std::string& what) {
    if (!present(name)) {
      m_missing.push_back(name);
      return {};
    }
    const TensorView* view = use(name);
    if (view->shape != std::vector<std::int64_t>{length}) {
      fail("tensor '" + name + "' has shape " + format_shape(view->shape) + ", but " + what + " must be [" +
           std::to_string(length) + "]");
    }
    return {view, false};
  }

  RoleTensor exact(const std::string& name, const std::vector<std::int64_t>& shape, const std::string& what) {
    if (!present(name)) {
      m_missing.push_back(name);
      return {};
    }
    const TensorView* view = use(name);
    if (view->shape != shape) {
      fail("tensor '" + name + "' has shape " + format_shape(view->shape) + ", but " + what + " must be " +
           format_shape(shape));
    }
    return {view, false};
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Error::Kind::InvalidInput, m_impl.directory.string() + ": " + what);
  }

 private:
  // Marks a tensor as part of the model; its dtype must be one we load.
  const TensorView* use(const std::string& name) {
    const auto index = m_impl.index_by_name.find(name);
    if (index == m_impl.index_by_name.end()) {
      const auto& location = m_impl.weights.by_name.at(name);
      m_impl.weights.files[location.file].view(*location.entry);  // throws Unsupported, naming the dtype
      fail("tensor '" + name + "' cannot be loaded");
    }
    const TensorView* view = &m_impl.tensors[index->second];
    if (m_impl.used.insert(name).second)
      m_impl.parameters += static_cast<std::uint64_t>(view->element_count());
    return view;
  }

  CheckpointData& m_impl;
  std::string m_prefix;
  std::vector<std::string> m_missing;
};

void resolve_layer(RoleResolver& resolver, const ModelConfig& config, std::size_t index,
                   LayerTensors& layer) {
  const std::string base = resolver.prefix() + "layers." + std::to_string(index) + ".";
  const std::string where = " of layer " + std::to_string(index);
  const std::int64_t d = config.hidden_size, n = config.intermediate_size;
  const std::int64_t q_rows = config.num_attention_heads * config.head_dim;
  const std::int64_t kv_rows = config.num_key_value_heads * config.head_dim;
  const std::string attn = base + "self_attn.", mlp = base + "mlp.";
  layer.q = resolver.linear(attn, {{"q_proj.weight", false}}, q_rows, d, "the attention query" + where);
  layer.k = resolver.linear(attn, {{"k_proj.weight", false}}, kv_rows, d, "the attention key" + where);
  layer.v = resolver.linear(attn, {{"v_proj.weight", false}}, kv_rows, d, "the attention value" + where);
  layer.o = resolver.linear(attn, {{"o_proj.weight", false}}, d, q_rows, "the attention output" + where);
  layer.input_norm = resolver.vector(base + "input_layernorm.weight", d, "input_layernorm" + where);
  layer.post_attention_norm =
      resolver.vector(base + "post_attention_layernorm.weight", d, "post_attention_layernorm" + where);
  // Spellings from SakanaAI's conversion utilities: gate_weight / down_weight are stored [in, out].
  layer.gate = resolver.linear(mlp, {{"gate_proj.weight", false}, {"gate_weight", true}, {"GATE", false}}, n,
                               d, "the FFN gate projection" + where + " (intermediate_size x hidden_size)");
  layer.up = resolver.linear(mlp, {{"up_proj.weight", false}, {"up_weight", false}, {"UP", false}}, n, d,
                             "the FFN up projection" + where + " (intermediate_size x hidden_size)");
  layer.down = resolver.linear(mlp, {{"down_proj.weight", false}, {"down_weight", true}, {"DOWN", true}}, d,
                               n, "the FFN down projection" + where + " (hidden_size x intermediate_size)");
}

// Tensors the forward would silently ignore although they change its result.
void reject_biases(const CheckpointData& impl, const std::string& layers_prefix) {
  for (const auto& [name, location] : impl.weights.by_name) {
    const bool in_layer = name.starts_with(layers_prefix);
    const bool is_bias = name.ends_with(".bias") && (name.find(".self_attn.") != std::string::npos ||
                                                     name.find(".mlp.") != std::string::npos);
    if (in_layer && is_bias) {
      throw Error(Error::Kind::Unsupported,
                  impl.directory.string() + ": tensor '" + name + "' is a projection bias (model_type " +
                      impl.config.model_type +
                      "); twellscope's forward has no attention or MLP biases yet, so this checkpoint "
                      "would run incorrectly");
    }
  }
}

void collect_unused(CheckpointData& impl, const std::string& layers_prefix) {
  std::int64_t highest_extra_layer = -1;
  for (const auto& [name, location] : impl.weights.by_name) {
    if (impl.used.count(name) != 0) continue;
    impl.unused.push_back(name);
    if (name.starts_with(layers_prefix)) {
      const auto layer = std::strtoll(name.c_str() + layers_prefix.size(), nullptr, 10);
      if (layer >= impl.config.num_hidden_layers)
        highest_extra_layer = std::max<std::int64_t>(highest_extra_layer, layer);
    }
  }
  if (highest_extra_layer >= 0) {
    impl.warnings.push_back("tensors exist up to layer " + std::to_string(highest_extra_layer) +
                            " but config.json has num_hidden_layers " +
                            std::to_string(impl.config.num_hidden_layers) + "; the extra layers are ignored");
  }
}

std::string list_missing(const std::vector<std::string>& missing) {
  std::string text;
  for (std::size_t i = 0; i < missing.size() && i < kMissingNamesShown; ++i)
    text += (i ? ", " : "") + missing[i];
  if (missing.size() > kMissingNamesShown)
    text += " and " + std::to_string(missing.size() - kMissingNamesShown) + " more";
  return text;
}

}  // namespace

struct Checkpoint::Impl : CheckpointData {};

Checkpoint Checkpoint::open(const fs::path& directory, const Options& options) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    throw Error(Error::Kind::InvalidInput, directory.string() +
                                               ": not a directory (a checkpoint is a folder "
                                               "with config.json and model.safetensors)");
  }
  auto impl = std::make_unique<Impl>();
  impl->directory = directory;
  const fs::path config_path = directory / "config.json";
  if (!fs::exists(config_path, error)) {
    throw Error(Error::Kind::InvalidInput,
                directory.string() + ": no config.json (is this a Hugging Face checkpoint directory?)");
  }
  impl->config = ModelConfig::load(config_path);
  require_supported_architecture(impl->config, config_path.string());
  if (!impl->config.gated_mlp) {
    throw Error(Error::Kind::Unsupported, config_path.string() +
                                              ": sparsity_gated_mlp is false (a non-gated "
                                              "up/down MLP); twellscope supports gated FFNs only");
  }
  try {
    impl->activation = resolve_activation(impl->config, options.activation_override);
  } catch (const Error& e) {
    throw Error(e.kind(), config_path.string() + ": " + e.what());
  }
  impl->weights = open_weight_files(directory);
  impl->warnings = impl->weights.warnings;

  for (const auto& [name, location] : impl->weights.by_name) {
    if (!location.entry->dtype) continue;
    impl->index_by_name.emplace(name, impl->tensors.size());
    impl->tensors.push_back(impl->weights.files[location.file].view(*location.entry));
  }

  const auto& config = impl->config;
  RoleResolver resolver(*impl);
  const std::string& prefix = resolver.prefix();
  impl->embedding = resolver.exact(prefix + "embed_tokens.weight", {config.vocab_size, config.hidden_size},
                                   "the token embedding (vocab_size x hidden_size)");
  impl->layers.resize(static_cast<std::size_t>(config.num_hidden_layers));
  for (std::size_t i = 0; i < impl->layers.size(); ++i) resolve_layer(resolver, config, i, impl->layers[i]);
  impl->final_norm = resolver.vector(prefix + "norm.weight", config.hidden_size, "the final norm");
  // A stored lm_head is used unless config.json ties it; transformers drops it when tied.
  impl->lm_head_tied = config.tie_word_embeddings || !resolver.present("lm_head.weight");
  if (impl->lm_head_tied) {
    impl->lm_head = impl->embedding;
    if (resolver.present("lm_head.weight")) {
      impl->warnings.push_back(
          "lm_head.weight is stored but tie_word_embeddings is true: the embedding is used");
    }
  } else {
    impl->lm_head = resolver.linear("", {{"lm_head.weight", false}}, config.vocab_size, config.hidden_size,
                                    "the output head (vocab_size x hidden_size)");
  }
  if (!resolver.missing().empty()) {
    throw Error(Error::Kind::InvalidInput,
                directory.string() + ": checkpoint is missing " + std::to_string(resolver.missing().size()) +
                    " tensor(s) that config.json requires: " + list_missing(resolver.missing()));
  }
  reject_biases(*impl, prefix + "layers.");
  collect_unused(*impl, prefix + "layers.");
  return Checkpoint(std::move(impl));
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

const fs::path& Checkpoint::directory() const {
  return m_impl->directory;
}
const ModelConfig& Checkpoint::config() const {
  return m_impl->config;
}
const ActivationChoice& Checkpoint::activation() const {
  return m_impl->activation;
}
const std::vector<TensorView>& Checkpoint::tensors() const {
  return m_impl->tensors;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  const auto it = m_impl->index_by_name.find(name);
  return it == m_impl->index_by_name.end() ? nullptr : &m_impl->tensors[it->second];
}

const RoleTensor& Checkpoint::embedding() const {
  return m_impl->embedding;
}
const RoleTensor& Checkpoint::final_norm() const {
  return m_impl->final_norm;
}
const RoleTensor& Checkpoint::lm_head() const {
  return m_impl->lm_head;
}
bool Checkpoint::lm_head_tied() const {
  return m_impl->lm_head_tied;
}

const LayerTensors& Checkpoint::layer(std::size_t index) const {
  if (index >= m_impl->layers.size()) {
    throw Error(Error::Kind::InvalidInput, "layer " + std::to_string(index) +
                                               " does not exist (the checkpoint has " +
                                               std::to_string(m_impl->layers.size()) + " layers)");
  }
  return m_impl->layers[index];
}

std::size_t Checkpoint::layer_count() const {
  return m_impl->layers.size();
}
const std::vector<std::string>& Checkpoint::unused_tensors() const {
  return m_impl->unused;
}
std::uint64_t Checkpoint::parameter_count() const {
  return m_impl->parameters;
}
const std::vector<std::string>& Checkpoint::warnings() const {
  return m_impl->warnings;
}

std::vector<fs::path> Checkpoint::weight_files() const {
  std::vector<fs::path> paths;
  for (const auto& file : m_impl->weights.files) paths.push_back(file.path());
  return paths;
}

}  // namespace twell
