// SPDX-License-Identifier: GPL-3.0-or-later
#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "twell/error.hpp"
#include "weight_files.hpp"

namespace twell {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr int kMaxIndexDepth = 8;

[[noreturn]] void fail(const fs::path& index, const std::string& what) {
  throw Error(Error::Kind::InvalidInput, index.string() + ": " + what);
}

json read_index(const fs::path& index) {
  std::ifstream in(index, std::ios::binary);
  if (!in) throw Error(Error::Kind::Io, index.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  auto limit_depth = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxIndexDepth) {
      fail(index, "JSON is nested too deeply for a sharded index");
    }
    return true;
  };
  try {
    return json::parse(text.str(), limit_depth);
  } catch (const json::exception& e) {
    fail(index, std::string("not valid JSON: ") + e.what());
  }
}

bool is_within(const fs::path& inner, const fs::path& outer) {
  const auto [outer_end, ignored] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return outer_end == outer.end();
}

// The Hugging Face hub cache stores snapshot files as symlinks into the repository's blobs folder
// (models--org--name/snapshots/<rev>/x -> ../../blobs/<sha>); those links are the one escape allowed.
std::optional<fs::path> hub_cache_blobs(const fs::path& canonical_directory) {
  const fs::path snapshots = canonical_directory.parent_path();
  const fs::path repository = snapshots.parent_path();
  if (snapshots.filename() != "snapshots" || !repository.filename().string().starts_with("models--")) {
    return std::nullopt;
  }
  return repository / "blobs";
}

// Resolves a shard name from the index to a file inside the checkpoint directory.
fs::path resolve_shard(const fs::path& index, const fs::path& canonical_directory, const std::string& shard) {
  const fs::path relative(shard);
  if (shard.empty()) fail(index, "weight_map names an empty shard file name");
  if (relative.is_absolute())
    fail(index, "shard '" + shard + "' is an absolute path; shards must be in the directory");
  for (const auto& part : relative) {
    if (part == "..")
      fail(index, "shard '" + shard + "' contains '..'; shards must be inside the checkpoint directory");
  }
  const fs::path candidate = canonical_directory / relative;
  std::error_code error;
  if (!fs::exists(candidate, error)) fail(index, "index names shard '" + shard + "', which does not exist");
  const fs::path resolved = fs::canonical(candidate, error);
  if (error) throw Error(Error::Kind::Io, candidate.string() + ": cannot resolve: " + error.message());
  const auto blobs = hub_cache_blobs(canonical_directory);
  if (!is_within(resolved, canonical_directory) && !(blobs && is_within(resolved, *blobs))) {
    fail(index, "shard '" + shard + "' resolves to " + resolved.string() +
                    ", outside the checkpoint directory (a symlink escape)");
  }
  return candidate;
}

}  // namespace

WeightFiles open_sharded_weight_files(const fs::path& directory, const fs::path& index) {
  const json root = read_index(index);
  if (!root.is_object()) fail(index, "a sharded index must be a JSON object");
  const auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) fail(index, "missing 'weight_map'");
  if (!weight_map->is_object()) fail(index, "'weight_map' must be an object of tensor name -> shard file");
  if (weight_map->empty()) fail(index, "'weight_map' is empty");

  std::error_code error;
  const fs::path canonical_directory = fs::canonical(directory, error);
  if (error) throw Error(Error::Kind::Io, directory.string() + ": cannot resolve: " + error.message());

  WeightFiles weights;
  std::map<std::string, std::size_t> file_by_shard_name;  // the index's spelling
  std::map<fs::path, std::size_t> file_by_path;           // dedupes "a" and "./a"
  std::map<std::string, std::size_t> declared_file;       // tensor name -> file index
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string())
      fail(index, "weight_map entry '" + name + "' must be a file name, got " + shard.dump());
    const auto& shard_name = shard.get_ref<const std::string&>();
    auto known = file_by_shard_name.find(shard_name);
    if (known == file_by_shard_name.end()) {
      const fs::path path = resolve_shard(index, canonical_directory, shard_name);
      const fs::path key = fs::canonical(path, error);
      if (error) throw Error(Error::Kind::Io, path.string() + ": cannot resolve: " + error.message());
      auto by_path = file_by_path.find(key);
      if (by_path == file_by_path.end()) {
        weights.files.push_back(SafetensorsFile::open(path));
        by_path = file_by_path.emplace(key, weights.files.size() - 1).first;
      }
      known = file_by_shard_name.emplace(shard_name, by_path->second).first;
    }
    declared_file.emplace(name, known->second);
  }

  std::uint64_t data_bytes = 0;
  for (std::size_t file = 0; file < weights.files.size(); ++file) {
    const auto& shard = weights.files[file];
    for (const auto& entry : shard.entries()) {
      data_bytes += entry.end - entry.begin;
      const auto [slot, inserted] = weights.by_name.emplace(entry.name, WeightFiles::Location{file, &entry});
      if (!inserted) {
        fail(index, "tensor '" + entry.name + "' is stored in two shards: " +
                        weights.files[slot->second.file].path().filename().string() + " and " +
                        shard.path().filename().string());
      }
      const auto declared = declared_file.find(entry.name);
      if (declared == declared_file.end()) {
        fail(index, "tensor '" + entry.name + "' in shard " + shard.path().filename().string() +
                        " is not listed in weight_map");
      }
      if (declared->second != file) {
        fail(index, "weight_map puts tensor '" + entry.name + "' in " +
                        weights.files[declared->second].path().filename().string() + " but it is stored in " +
                        shard.path().filename().string());
      }
    }
    for (const auto& warning : shard.warnings()) weights.warnings.push_back(warning);
  }
  for (const auto& [name, file] : declared_file) {
    if (weights.files[file].find(name) == nullptr) {
      fail(index, "weight_map puts tensor '" + name + "' in " +
                      weights.files[file].path().filename().string() + ", which does not contain it");
    }
  }

  // total_size is advisory (writers disagree on what it counts), so a mismatch only warns.
  const auto metadata = root.find("metadata");
  if (metadata != root.end() && metadata->is_object()) {
    const auto total = metadata->find("total_size");
    if (total != metadata->end() && total->is_number_unsigned() &&
        total->get<std::uint64_t>() != data_bytes) {
      weights.warnings.push_back(index.string() + ": metadata.total_size is " +
                                 std::to_string(total->get<std::uint64_t>()) + " but the shards hold " +
                                 std::to_string(data_bytes) + " bytes of tensor data");
    }
  }
  return weights;
}

WeightFiles open_weight_files(const fs::path& directory) {
  const fs::path single = directory / kSingleFile;
  const fs::path index = directory / kIndexFile;
  std::error_code error;
  if (fs::exists(single, error)) {
    WeightFiles weights;
    weights.files.push_back(SafetensorsFile::open(single));
    const auto& file = weights.files.front();
    for (const auto& entry : file.entries())
      weights.by_name.emplace(entry.name, WeightFiles::Location{0, &entry});
    weights.warnings = file.warnings();
    return weights;
  }
  if (fs::exists(index, error)) return open_sharded_weight_files(directory, index);
  std::string hint;
  if (fs::exists(directory / "pytorch_model.bin", error) ||
      fs::exists(directory / "pytorch_model.bin.index.json", error)) {
    hint = " (pytorch_model.bin pickles are not loaded: they can run arbitrary code; convert to safetensors)";
  }
  throw Error(Error::Kind::InvalidInput,
              directory.string() + ": no " + kSingleFile + " or " + kIndexFile + " in this directory" + hint);
}

}  // namespace twell
