// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "tiny_checkpoint.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/safetensors.hpp"

namespace twell {
namespace {

namespace fs = std::filesystem;
using test::FfnSpelling;
using test::TempDir;
using test::TinyCheckpointOptions;

// Every element of the role's nn.Linear matrix equals the value the helper stored, read through
// the stored layout (so orientation mistakes show up as value mismatches).
void expect_linear_values(const RoleTensor& role) {
  ASSERT_NE(role.view, nullptr);
  const Matrix m = role.to_linear_matrix();
  const auto stored_cols = static_cast<std::size_t>(role.view->shape.back());
  for (std::size_t r = 0; r < m.rows; ++r) {
    for (std::size_t c = 0; c < m.cols; ++c) {
      const std::size_t stored = role.transposed ? c * stored_cols + r : r * stored_cols + c;
      ASSERT_EQ(m.at(r, c), test::tiny_checkpoint_value(role.view->name, stored)) << role.view->name;
    }
  }
}

void expect_open_error(const fs::path& dir, Error::Kind kind, const std::vector<std::string>& fragments,
                       const Checkpoint::Options& options = {}) {
  try {
    Checkpoint::open(dir, options);
    FAIL() << "expected an error for " << dir;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "missing \"" << fragment << "\" in: " << e.what();
    }
  }
}

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(test::read_file(path));
}
void write_json(const fs::path& path, const nlohmann::json& value) {
  test::write_file(path, value.dump(2));
}

class CheckpointTest : public ::testing::Test {
 protected:
  fs::path write(const TinyCheckpointOptions& options = {}, const std::string& name = "model") {
    const fs::path dir = m_dir.path() / name;
    test::write_tiny_llama_checkpoint(dir, options);
    return dir;
  }
  TempDir m_dir{"twell-checkpoint"};
};

TEST_F(CheckpointTest, OpensTinyLlama) {
  const auto checkpoint = Checkpoint::open(write());
  EXPECT_EQ(checkpoint.layer_count(), 2u);
  EXPECT_EQ(checkpoint.config().hidden_size, 64);
  EXPECT_EQ(checkpoint.config().head_dim, 16);
  EXPECT_EQ(checkpoint.activation().activation, Activation::Silu);
  EXPECT_FALSE(checkpoint.lm_head_tied());
  EXPECT_TRUE(checkpoint.unused_tensors().empty());
  EXPECT_EQ(checkpoint.weight_files().size(), 1u);
  const auto& layer = checkpoint.layer(1);
  EXPECT_EQ(layer.gate.view->name, "model.layers.1.mlp.gate_proj.weight");
  EXPECT_EQ(layer.down.view->shape, (std::vector<std::int64_t>{64, 256}));
  EXPECT_EQ(layer.k.view->shape, (std::vector<std::int64_t>{32, 64}));
  for (const auto* role : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down}) {
    EXPECT_FALSE(role->transposed) << role->view->name;
    expect_linear_values(*role);
  }
  EXPECT_EQ(layer.input_norm.to_linear_matrix().cols, 64u);
  EXPECT_EQ(checkpoint.find("model.norm.weight"), checkpoint.final_norm().view);
  EXPECT_EQ(checkpoint.find("absent"), nullptr);
  expect_linear_values(checkpoint.lm_head());
  // 2 x (q 4096 + k 2048 + v 2048 + o 4096 + 3 x 16384 FFN + 2 x 64 norms) + 2 x 96 x 64 + 64
  EXPECT_EQ(checkpoint.parameter_count(),
            2u * (4096 + 2048 + 2048 + 4096 + 3 * 16384 + 128) + 2 * 96 * 64 + 64);
  EXPECT_THROW(checkpoint.layer(2), Error);
}

TEST_F(CheckpointTest, TiedOrAbsentLmHeadUsesTheEmbedding) {
  TinyCheckpointOptions tied;
  tied.tie_word_embeddings = true;
  tied.store_lm_head = false;
  const auto checkpoint = Checkpoint::open(write(tied, "tied"));
  EXPECT_TRUE(checkpoint.lm_head_tied());
  EXPECT_EQ(checkpoint.lm_head().view, checkpoint.embedding().view);
  EXPECT_EQ(checkpoint.parameter_count(), 2u * (4096 + 2048 + 2048 + 4096 + 3 * 16384 + 128) + 96 * 64 + 64);

  TinyCheckpointOptions absent;
  absent.store_lm_head = false;
  EXPECT_TRUE(Checkpoint::open(write(absent, "absent")).lm_head_tied());

  TinyCheckpointOptions stored_but_tied;
  stored_but_tied.tie_word_embeddings = true;
  const auto redundant = Checkpoint::open(write(stored_but_tied, "redundant"));
  EXPECT_TRUE(redundant.lm_head_tied());
  EXPECT_EQ(redundant.unused_tensors(), std::vector<std::string>{"lm_head.weight"});
}

TEST_F(CheckpointTest, OrientationComesFromShapes) {
  const std::vector<std::tuple<FfnSpelling, bool, bool, bool>> cases{
      {FfnSpelling::SakanaWeights, true, false, true},
      {FfnSpelling::TwellCaps, false, false, true},
      {FfnSpelling::DownTransposed, false, false, true}};
  int index = 0;
  for (const auto& [spelling, gate_t, up_t, down_t] : cases) {
    TinyCheckpointOptions options;
    options.ffn_spelling = spelling;
    const auto checkpoint = Checkpoint::open(write(options, "spelling" + std::to_string(index++)));
    const auto& layer = checkpoint.layer(0);
    EXPECT_EQ(layer.gate.transposed, gate_t) << layer.gate.view->name;
    EXPECT_EQ(layer.up.transposed, up_t) << layer.up.view->name;
    EXPECT_EQ(layer.down.transposed, down_t) << layer.down.view->name;
    const Matrix down = layer.down.to_linear_matrix();
    EXPECT_EQ(down.rows, 64u);
    EXPECT_EQ(down.cols, 256u);
    expect_linear_values(layer.gate);
    expect_linear_values(layer.down);
  }
}

TEST_F(CheckpointTest, SquareFfnFallsBackToTheSpellingsLayout) {
  TinyCheckpointOptions options;
  options.intermediate_size = 64;
  options.ffn_spelling = FfnSpelling::SakanaWeights;
  const auto checkpoint = Checkpoint::open(write(options));
  EXPECT_TRUE(checkpoint.layer(0).gate.transposed);
  EXPECT_FALSE(checkpoint.layer(0).up.transposed);
  EXPECT_TRUE(checkpoint.layer(0).down.transposed);
}

TEST_F(CheckpointTest, F16AndF32WeightsConvertExactly) {
  for (const char* dtype : {"F16", "F32"}) {
    TinyCheckpointOptions options;
    options.dtype = dtype;
    const auto checkpoint = Checkpoint::open(write(options, dtype));
    EXPECT_EQ(checkpoint.layer(0).up.view->dtype, dtype == std::string("F16") ? DType::F16 : DType::F32);
    expect_linear_values(checkpoint.layer(0).up);
    expect_linear_values(checkpoint.embedding());
  }
}

TEST_F(CheckpointTest, ShardedCheckpointMatchesSingleFile) {
  TinyCheckpointOptions options;
  options.shards = 2;
  const auto sharded = Checkpoint::open(write(options, "sharded"));
  const auto single = Checkpoint::open(write({}, "single"));
  EXPECT_EQ(sharded.weight_files().size(), 2u);
  EXPECT_EQ(sharded.parameter_count(), single.parameter_count());
  EXPECT_EQ(sharded.layer(1).down.to_linear_matrix().data, single.layer(1).down.to_linear_matrix().data);
  EXPECT_NE(sharded.layer(0).down.view->file, sharded.layer(1).down.view->file);
  EXPECT_TRUE(sharded.warnings().empty()) << sharded.warnings().front();
}

TEST_F(CheckpointTest, ActivationResolution) {
  TinyCheckpointOptions options;
  options.model_type = "llama_sparse_relu";
  const auto dir = write(options);
  EXPECT_EQ(Checkpoint::open(dir).activation().activation, Activation::Relu);
  EXPECT_EQ(Checkpoint::open(dir, {Activation::Silu}).activation().activation, Activation::Silu);
}

TEST_F(CheckpointTest, UnusedTensorsAreListedNotFatal) {
  TinyCheckpointOptions options;
  options.extra = {{"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}},
                   {"tracker.counts", "I64", {4}},
                   {"model.layers.7.mlp.gate_proj.weight", "BF16", {4, 4}}};
  const auto checkpoint = Checkpoint::open(write(options));
  const auto& unused = checkpoint.unused_tensors();
  EXPECT_EQ(unused.size(), 3u);
  EXPECT_NE(std::find(unused.begin(), unused.end(), "tracker.counts"), unused.end());
  ASSERT_EQ(checkpoint.warnings().size(), 1u);
  EXPECT_NE(checkpoint.warnings()[0].find("up to layer 7"), std::string::npos) << checkpoint.warnings()[0];
}

// --- malformed directories ---

TEST_F(CheckpointTest, EmptyDirectory) {
  fs::create_directories(m_dir.path() / "empty");
  expect_open_error(m_dir.path() / "empty", Error::Kind::InvalidInput, {"empty", "no config.json"});
}

TEST_F(CheckpointTest, NotADirectory) {
  expect_open_error(m_dir.path() / "absent", Error::Kind::InvalidInput, {"not a directory"});
  test::write_file(m_dir.path() / "file", "x");
  expect_open_error(m_dir.path() / "file", Error::Kind::InvalidInput, {"not a directory"});
}

TEST_F(CheckpointTest, ConfigWithoutWeights) {
  const auto dir = write();
  fs::remove(dir / "model.safetensors");
  test::write_file(dir / "pytorch_model.bin", "pickle");
  expect_open_error(dir, Error::Kind::InvalidInput, {"no model.safetensors", "pytorch_model.bin"});
}

TEST_F(CheckpointTest, ConfigMissingFieldNamesConfigFile) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"num_hidden_layers", nullptr}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"config.json", "'num_hidden_layers' is missing"});
}

TEST_F(CheckpointTest, ConfigWrongType) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"hidden_size", "64"}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"config.json", "'hidden_size' must be a positive integer"});
}

TEST_F(CheckpointTest, MissingTensorsAreAllNamed) {
  TinyCheckpointOptions options;
  options.omit = {"model.layers.1.mlp.up_proj.weight", "model.norm.weight"};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"missing 2 tensor(s)", "model.layers.1.mlp.up_proj.weight", "model.norm.weight"});
}

TEST_F(CheckpointTest, FfnShapeDisagreesWithConfig) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"intermediate_size", 128}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"model.layers.0.mlp.gate_proj.weight", "shape [256, 64]", "[128, 64] or its transpose"});
}

TEST_F(CheckpointTest, VocabDisagreesWithConfig) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"vocab_size", 100}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"model.embed_tokens.weight", "[96, 64]", "must be [100, 64]"});
}

TEST_F(CheckpointTest, KvHeadsDisagreeWithConfig) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"num_key_value_heads", 4}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"model.layers.0.self_attn.k_proj.weight", "[32, 64]"});
}

TEST_F(CheckpointTest, UnsupportedDtypeIsNamed) {
  TinyCheckpointOptions options;
  options.dtype = "F64";
  expect_open_error(write(options), Error::Kind::Unsupported, {"dtype F64", "supported: BF16, F16, F32"});
}

TEST_F(CheckpointTest, UnsupportedArchitectureListsSupportedOnes) {
  TinyCheckpointOptions options;
  options.model_type = "gpt2";
  expect_open_error(write(options), Error::Kind::Unsupported,
                    {"'gpt2'", "llama, llama_sparse_relu, mistral, qwen2"});
}

TEST_F(CheckpointTest, Qwen2AttentionBiasesAreRefused) {
  TinyCheckpointOptions options;
  options.model_type = "qwen2";
  options.extra = {{"model.layers.0.self_attn.q_proj.bias", "BF16", {64}}};
  expect_open_error(write(options), Error::Kind::Unsupported,
                    {"model.layers.0.self_attn.q_proj.bias", "qwen2", "no attention or MLP biases"});
  TinyCheckpointOptions plain;
  plain.model_type = "qwen2";
  EXPECT_NO_THROW(Checkpoint::open(write(plain, "nobias")));
}

TEST_F(CheckpointTest, UnsupportedHiddenActNamesConfigUnlessOverridden) {
  TinyCheckpointOptions options;
  options.hidden_act = "gelu";
  const auto dir = write(options);
  expect_open_error(dir, Error::Kind::Unsupported, {"config.json", "hidden_act 'gelu' is not supported"});
  EXPECT_EQ(Checkpoint::open(dir, {Activation::Relu}).activation().activation, Activation::Relu);
}

TEST_F(CheckpointTest, NonGatedMlpIsRefused) {
  TinyCheckpointOptions options;
  options.config_overrides = {{"sparsity_gated_mlp", false}};
  expect_open_error(write(options), Error::Kind::Unsupported, {"sparsity_gated_mlp"});
}

TEST_F(CheckpointTest, TwoSpellingsOfOneWeight) {
  TinyCheckpointOptions options;
  options.extra = {{"model.layers.0.mlp.GATE", "BF16", {256, 64}}};
  expect_open_error(write(options), Error::Kind::InvalidInput,
                    {"both 'model.layers.0.mlp.gate_proj.weight' and 'model.layers.0.mlp.GATE'"});
}

TEST_F(CheckpointTest, TruncatedWeightsFileIsNamed) {
  const auto dir = write();
  const auto bytes = test::read_file(dir / "model.safetensors");
  test::write_file(dir / "model.safetensors", bytes.substr(0, bytes.size() - 1));
  expect_open_error(dir, Error::Kind::InvalidInput, {"model.safetensors", "is the file truncated?"});
}

class ShardedIndexTest : public CheckpointTest {
 protected:
  fs::path sharded() {
    TinyCheckpointOptions options;
    options.shards = 2;
    return write(options, "sharded");
  }
  fs::path index(const fs::path& dir) { return dir / "model.safetensors.index.json"; }
  // Rewrites the index's weight_map entry for `tensor`.
  void remap(const fs::path& dir, const std::string& tensor, const std::string& shard) {
    auto json = read_json(index(dir));
    json["weight_map"][tensor] = shard;
    write_json(index(dir), json);
  }
};

TEST_F(ShardedIndexTest, IndexNamesMissingShard) {
  const auto dir = sharded();
  remap(dir, "model.norm.weight", "model-00003-of-00003.safetensors");
  expect_open_error(
      dir, Error::Kind::InvalidInput,
      {"model.safetensors.index.json", "shard 'model-00003-of-00003.safetensors', which does not exist"});
}

TEST_F(ShardedIndexTest, IndexPutsTensorInWrongShard) {
  const auto dir = sharded();
  remap(dir, "model.norm.weight", "model-00001-of-00002.safetensors");
  expect_open_error(dir, Error::Kind::InvalidInput,
                    {"'model.norm.weight'", "model-00001-of-00002.safetensors"});
}

TEST_F(ShardedIndexTest, IndexListsTensorNoShardHolds) {
  const auto dir = sharded();
  remap(dir, "model.layers.9.mlp.up_proj.weight", "model-00001-of-00002.safetensors");
  expect_open_error(dir, Error::Kind::InvalidInput,
                    {"'model.layers.9.mlp.up_proj.weight'", "does not contain it"});
}

TEST_F(ShardedIndexTest, ShardTensorMissingFromIndex) {
  const auto dir = sharded();
  auto json = read_json(index(dir));
  json["weight_map"].erase("model.norm.weight");
  write_json(index(dir), json);
  expect_open_error(dir, Error::Kind::InvalidInput, {"'model.norm.weight'", "not listed in weight_map"});
}

TEST_F(ShardedIndexTest, TensorStoredInTwoShards) {
  const auto dir = m_dir.path() / "dup";
  test::write_tiny_llama_checkpoint(dir, {});
  fs::rename(dir / "model.safetensors", dir / "a.safetensors");
  // b.safetensors is named first in weight_map order ("aaa.extra"), so a's copy is the second one seen.
  const std::vector<float> one{1.0f};
  std::vector<float> norm(64, 1.0f);
  write_safetensors(dir / "b.safetensors",
                    {{{"aaa.extra", "F32", {1}}, std::as_bytes(std::span(one))},
                     {{"model.norm.weight", "F32", {64}}, std::as_bytes(std::span(norm))}});
  nlohmann::json weight_map;
  const auto first_shard = SafetensorsFile::open(dir / "a.safetensors");
  for (const auto& entry : first_shard.entries()) weight_map[entry.name] = "a.safetensors";
  weight_map["aaa.extra"] = "b.safetensors";
  weight_map["model.norm.weight"] = "b.safetensors";
  write_json(index(dir), {{"weight_map", weight_map}});
  expect_open_error(dir, Error::Kind::InvalidInput, {"'model.norm.weight' is stored in two shards"});
}

TEST_F(ShardedIndexTest, ShardPathsAreConfinedToTheDirectory) {
  const auto dir = sharded();
  const std::string norm = "model.norm.weight";
  remap(dir, norm, "../model-00002-of-00002.safetensors");
  expect_open_error(dir, Error::Kind::InvalidInput, {"contains '..'"});
  remap(dir, norm, (dir / "model-00002-of-00002.safetensors").string());
  expect_open_error(dir, Error::Kind::InvalidInput, {"is an absolute path"});
  // A symlink inside the folder that points outside it.
  fs::copy_file(dir / "model-00002-of-00002.safetensors", m_dir.path() / "outside.safetensors");
  fs::create_symlink(m_dir.path() / "outside.safetensors", dir / "link.safetensors");
  remap(dir, norm, "link.safetensors");
  expect_open_error(dir, Error::Kind::InvalidInput, {"outside the checkpoint directory"});
}

TEST_F(ShardedIndexTest, IndexIsNotJsonOrHasNoWeightMap) {
  const auto dir = sharded();
  test::write_file(index(dir), "{\"weight_map\": ");
  expect_open_error(dir, Error::Kind::InvalidInput, {"model.safetensors.index.json", "not valid JSON"});
  write_json(index(dir), {{"metadata", {{"total_size", 1}}}});
  expect_open_error(dir, Error::Kind::InvalidInput, {"missing 'weight_map'"});
  write_json(index(dir), {{"weight_map", {{"model.norm.weight", 3}}}});
  expect_open_error(dir, Error::Kind::InvalidInput, {"must be a file name"});
}

TEST_F(ShardedIndexTest, TotalSizeMismatchIsAWarning) {
  const auto dir = sharded();
  auto json = read_json(index(dir));
  json["metadata"]["total_size"] = 12345;
  write_json(index(dir), json);
  const auto checkpoint = Checkpoint::open(dir);
  ASSERT_EQ(checkpoint.warnings().size(), 1u);
  EXPECT_NE(checkpoint.warnings()[0].find("total_size is 12345"), std::string::npos);
}

TEST_F(ShardedIndexTest, HubCacheSymlinksIntoBlobsAreAllowed) {
  // models--org--name/snapshots/<rev>/ holds links into models--org--name/blobs/.
  const auto repo = m_dir.path() / "models--org--tiny";
  const auto snapshot = repo / "snapshots" / "abc123";
  TinyCheckpointOptions options;
  options.shards = 2;
  test::write_tiny_llama_checkpoint(snapshot, options);
  fs::create_directories(repo / "blobs");
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    fs::rename(snapshot / shard, repo / "blobs" / shard);
    fs::create_symlink(fs::path("../../blobs") / shard, snapshot / shard);
  }
  EXPECT_EQ(Checkpoint::open(snapshot).layer_count(), 2u);
}

}  // namespace
}  // namespace twell
