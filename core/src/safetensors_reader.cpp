// SPDX-License-Identifier: GPL-3.0-or-later
// Validation follows docs/MODELS.md §3.3 strictly: anything the official Rust reader rejects is
// rejected here too, plus duplicate keys, which many JSON parsers silently merge.
#include <algorithm>
#include <bit>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "memory_map.hpp"
#include "safetensors_dtypes.hpp"
#include "twell/error.hpp"
#include "twell/safetensors.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; twellscope does not byte-swap on big-endian hosts");

namespace twell {
namespace {

using nlohmann::json;
using safetensors_detail::find_dtype;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the official reader's cap
constexpr int kMaxJsonDepth = 3;                        // root / tensor entry / shape array

std::string in_quotes(std::string_view text) {
  return "'" + std::string(text) + "'";
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error(Error::Kind::InvalidInput, path.string() + ": " + what);
}

[[noreturn]] void fail_tensor(const std::filesystem::path& path, const std::string& name,
                              const std::string& what) {
  throw Error(Error::Kind::InvalidInput, path.string() + ": tensor " + in_quotes(name) + ": " + what);
}

std::uint64_t read_u64_le(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  return value;
}

// Parses with a callback that bounds nesting (the DOM destructor recurses) and rejects duplicate
// keys at every level (nlohmann would silently keep the last one).
json parse_header_json(const std::filesystem::path& path, std::string_view text) {
  std::vector<std::set<std::string>> keys_by_depth(kMaxJsonDepth + 2);
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    const auto level = static_cast<std::size_t>(depth);
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          fail(path,
               "header JSON is nested deeper than " + std::to_string(kMaxJsonDepth) +
                   " levels (a safetensors header is {name: {dtype, shape: [...], data_offsets: [...]}})");
        }
        keys_by_depth[level + 1].clear();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys_by_depth[level].insert(key).second) {
          fail(path, "header JSON has the key " + in_quotes(key) + " twice" +
                         (depth == 1 ? " (a duplicate tensor name)" : " in one object"));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
}

std::map<std::string, std::string> parse_metadata(const std::filesystem::path& path, const json& value) {
  if (!value.is_object()) fail(path, "__metadata__ must be an object of strings, got " + value.dump());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail(path, "__metadata__ value for " + in_quotes(key) + " must be a string, got " + item.dump());
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

SafetensorsEntry parse_entry(const std::filesystem::path& path, const std::string& name, const json& value,
                             std::vector<std::string>& warnings) {
  if (name.empty()) fail(path, "a tensor has an empty name");
  if (name.find('\0') != std::string::npos) fail(path, "a tensor name contains a NUL character");
  if (!value.is_object()) fail_tensor(path, name, "entry must be an object, got " + value.dump());
  SafetensorsEntry entry;
  entry.name = name;

  const auto dtype = value.find("dtype");
  if (dtype == value.end()) fail_tensor(path, name, "missing 'dtype'");
  if (!dtype->is_string()) fail_tensor(path, name, "'dtype' must be a string, got " + dtype->dump());
  entry.dtype_name = dtype->get<std::string>();
  const auto* info = find_dtype(entry.dtype_name);
  if (info == nullptr) fail_tensor(path, name, "unknown dtype " + in_quotes(entry.dtype_name));
  entry.dtype = info->loadable;

  const auto shape = value.find("shape");
  if (shape == value.end()) fail_tensor(path, name, "missing 'shape'");
  if (!shape->is_array()) fail_tensor(path, name, "'shape' must be an array, got " + shape->dump());
  std::uint64_t elements = 1;
  bool overflow = false;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) {
      fail_tensor(path, name,
                  "shape " + shape->dump() + " has " + dim.dump() + ", not a non-negative integer");
    }
    const auto extent = dim.get<std::uint64_t>();
    if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) overflow = true;
    overflow = __builtin_mul_overflow(elements, extent, &elements) || overflow;
    entry.shape.push_back(static_cast<std::int64_t>(extent));
  }
  std::uint64_t bits = 0;
  if (overflow || __builtin_mul_overflow(elements, std::uint64_t{info->bits}, &bits)) {
    fail_tensor(path, name, "shape " + shape->dump() + " overflows: its size does not fit in 64 bits");
  }
  if (bits % 8 != 0) {
    fail_tensor(path, name,
                "shape " + shape->dump() + " of " + entry.dtype_name + " is not a whole number of bytes");
  }

  const auto offsets = value.find("data_offsets");
  if (offsets == value.end()) fail_tensor(path, name, "missing 'data_offsets'");
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    fail_tensor(path, name,
                "'data_offsets' must be two non-negative integers [begin, end], got " + offsets->dump());
  }
  entry.begin = (*offsets)[0].get<std::uint64_t>();
  entry.end = (*offsets)[1].get<std::uint64_t>();
  if (entry.begin > entry.end) {
    fail_tensor(
        path, name,
        "data_offsets begin " + std::to_string(entry.begin) + " is after end " + std::to_string(entry.end));
  }
  if (entry.end - entry.begin != bits / 8) {
    fail_tensor(path, name,
                "data_offsets span " + std::to_string(entry.end - entry.begin) + " bytes but shape " +
                    shape->dump() + " of " + entry.dtype_name + " needs " + std::to_string(bits / 8));
  }
  for (const auto& [key, ignored] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      warnings.push_back(path.string() + ": tensor " + in_quotes(name) + ": ignored unknown field " +
                         in_quotes(key));
    }
  }
  return entry;
}

// Tensors sorted by offset must tile [0, data_len) exactly: no overlap, no gap, nothing after.
void check_layout(const std::filesystem::path& path, std::vector<SafetensorsEntry>& entries,
                  std::uint64_t data_len) {
  for (const auto& entry : entries) {
    if (entry.end > data_len) {
      fail_tensor(path, entry.name,
                  "data_offsets end " + std::to_string(entry.end) + " is beyond the data buffer (" +
                      std::to_string(data_len) + " bytes; is the file truncated?)");
    }
  }
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& entry : entries) {
    if (entry.begin < expected_begin) {
      fail(path, "tensors " + in_quotes(previous->name) + " and " + in_quotes(entry.name) + " overlap (" +
                     in_quotes(previous->name) + " ends at byte " + std::to_string(expected_begin) + ", " +
                     in_quotes(entry.name) + " begins at " + std::to_string(entry.begin) + ")");
    }
    if (entry.begin > expected_begin) {
      fail(path, "gap of " + std::to_string(entry.begin - expected_begin) + " unused bytes before tensor " +
                     in_quotes(entry.name) + " (data must be contiguous from offset 0)");
    }
    expected_begin = entry.end;
    previous = &entry;
  }
  if (expected_begin != data_len) {
    fail(path, std::to_string(data_len - expected_begin) +
                   " trailing bytes after the last tensor (the data buffer is " + std::to_string(data_len) +
                   " bytes, the tensors cover " + std::to_string(expected_begin) + ")");
  }
}

}  // namespace

struct SafetensorsFile::State {
  std::filesystem::path path;
  MemoryMap map;
  std::uint64_t header_size = 0;
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::size_t> index_by_name;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> warnings;

  std::span<const std::byte> data() const { return map.bytes().subspan(8 + header_size); }
};

SafetensorsFile::SafetensorsFile(std::shared_ptr<const State> state) : m_state(std::move(state)) {}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  state->map = MemoryMap::open(path);
  const auto file = state->map.bytes();
  if (file.size() < 8) {
    fail(path,
         "file is " + std::to_string(file.size()) + " bytes, too short for a safetensors header length");
  }
  const std::uint64_t header_size = read_u64_le(file.first(8));
  if (header_size < 2)
    fail(path, "header length " + std::to_string(header_size) + " is too small for a JSON object");
  if (header_size > kMaxHeaderBytes) {
    fail(path, "header length " + std::to_string(header_size) +
                   " exceeds the 100 MB limit (not a safetensors file?)");
  }
  if (header_size > file.size() - 8) {
    fail(path, "header length " + std::to_string(header_size) + " runs past the end of the " +
                   std::to_string(file.size()) + "-byte file");
  }
  state->header_size = header_size;
  const auto* header_begin = reinterpret_cast<const char*>(file.data() + 8);
  const std::string_view header_text(header_begin, header_size);
  const auto first = header_text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || header_text[first] != '{') {
    fail(path, "header is not a JSON object (it must start with '{')");
  }
  if (header_text.find('\0') != std::string_view::npos) fail(path, "header contains a NUL byte");

  const json header = parse_header_json(path, header_text);
  if (!header.is_object()) fail(path, "header is not a JSON object");
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      state->metadata = parse_metadata(path, value);
    } else {
      state->entries.push_back(parse_entry(path, name, value, state->warnings));
    }
  }
  check_layout(path, state->entries, file.size() - 8 - header_size);
  for (std::size_t i = 0; i < state->entries.size(); ++i)
    state->index_by_name.emplace(state->entries[i].name, i);
  return SafetensorsFile(std::move(state));
}

const std::filesystem::path& SafetensorsFile::path() const {
  return m_state->path;
}
std::uint64_t SafetensorsFile::file_size() const {
  return m_state->map.size();
}
std::uint64_t SafetensorsFile::header_size() const {
  return m_state->header_size;
}
const std::vector<SafetensorsEntry>& SafetensorsFile::entries() const {
  return m_state->entries;
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return m_state->metadata;
}
const std::vector<std::string>& SafetensorsFile::warnings() const {
  return m_state->warnings;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = m_state->index_by_name.find(name);
  return it == m_state->index_by_name.end() ? nullptr : &m_state->entries[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& entry) const {
  return m_state->data().subspan(entry.begin, entry.end - entry.begin);
}

TensorView SafetensorsFile::view(const std::string& name) const {
  const auto* entry = find(name);
  if (entry == nullptr) {
    throw Error(Error::Kind::InvalidInput, m_state->path.string() + ": no tensor named " + in_quotes(name));
  }
  return view(*entry);
}

TensorView SafetensorsFile::view(const SafetensorsEntry& entry) const {
  if (!entry.dtype) {
    throw Error(Error::Kind::Unsupported, m_state->path.string() + ": tensor " + in_quotes(entry.name) +
                                              " has dtype " + entry.dtype_name +
                                              ", which twellscope does not load (supported: BF16, F16, F32)");
  }
  TensorView view;
  view.name = entry.name;
  view.dtype = *entry.dtype;
  view.shape = entry.shape;
  view.bytes = bytes(entry);
  view.file = m_state->path.string();
  return view;
}

}  // namespace twell
