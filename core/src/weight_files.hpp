// SPDX-License-Identifier: GPL-3.0-or-later
// The safetensors files of a checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json, with every tensor name routed to the one file that holds it.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "twell/safetensors.hpp"

namespace twell {

struct WeightFiles {
  std::vector<SafetensorsFile> files;
  struct Location {
    std::size_t file = 0;
    const SafetensorsEntry* entry = nullptr;
  };
  std::map<std::string, Location> by_name;
  std::vector<std::string> warnings;
};

/// Opens model.safetensors if present, else the sharded index. Throws twell::Error naming the
/// directory when neither exists, and naming the index, shard and tensor for every inconsistency.
WeightFiles open_weight_files(const std::filesystem::path& directory);

/// Validates a sharded index and opens its shards (MODELS.md §3.3 rule 10).
WeightFiles open_sharded_weight_files(const std::filesystem::path& directory,
                                      const std::filesystem::path& index);

}  // namespace twell
