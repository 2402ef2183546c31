// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer: model.safetensors.index.json on arbitrary text, in a folder holding two valid shards
// (named as the seed corpus names them), so mutated indexes exercise shard resolution, path
// confinement and the name/shard cross-checks, not only the JSON parser.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "twell/error.hpp"
#include "twell/safetensors.hpp"
#include "weight_files.hpp"

namespace {

std::filesystem::path make_model_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("twell-fuzz-index-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::byte> embed(2 * 4 * 8), norm(2 * 8);
  twell::write_safetensors(dir / "model-00001-of-00002.safetensors",
                           {{{"model.embed_tokens.weight", "BF16", {4, 8}}, embed}});
  twell::write_safetensors(dir / "model-00002-of-00002.safetensors", {{{"model.norm.weight", "BF16", {8}}, norm}});
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = make_model_dir();
  const auto index = dir / "model.safetensors.index.json";
  if (FILE* file = std::fopen(index.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, file);
    std::fclose(file);
  } else {
    return 0;
  }
  try {
    const auto files = twell::open_sharded_weight_files(dir, index);
    for (const auto& [name, location] : files.by_name) {
      if (location.file >= files.files.size() || location.entry == nullptr) __builtin_trap();
    }
  } catch (const twell::Error&) {
  }
  return 0;
}
