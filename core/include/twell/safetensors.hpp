// SPDX-License-Identifier: GPL-3.0-or-later
// The safetensors format (huggingface/safetensors): u64 little-endian header length N, N bytes of JSON
// mapping tensor names to {dtype, shape, data_offsets}, then the raw little-endian row-major data.
// The reader validates every rule of docs/MODELS.md §3.3 on open and reads nothing but the header;
// the writer streams tensor bytes to a temporary file and renames it into place when complete.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "twell/checkpoint.hpp"

namespace twell {

/// The dtype name as written in safetensors headers ("BF16", "F16", "F32").
const char* safetensors_dtype_name(DType dtype) noexcept;
/// The loadable dtype for a safetensors dtype name; nullopt for names twellscope does not load.
std::optional<DType> dtype_from_safetensors_name(const std::string& name) noexcept;
/// True for every dtype name the safetensors format defines (BOOL, U8, ..., F8_E4M3, C64...).
bool is_known_safetensors_dtype(const std::string& name) noexcept;

/// One tensor entry of a safetensors header, validated.
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;           ///< as written in the header, e.g. "BF16" or "I64"
  std::optional<DType> dtype;       ///< set when twellscope can load this dtype
  std::vector<std::int64_t> shape;  ///< empty for a 0-rank scalar
  std::uint64_t begin = 0;          ///< byte offsets relative to the data buffer, end exclusive
  std::uint64_t end = 0;
};

/// A read-only memory map of one safetensors file whose header has been validated. Tensor data is
/// not touched until a view is converted. Views stay valid while any copy of this object lives.
class SafetensorsFile {
 public:
  /// Maps the file (PROT_READ, MAP_PRIVATE) and validates its header. Throws twell::Error:
  /// Io when the file cannot be opened or mapped, InvalidInput when it is malformed.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const;
  std::uint64_t file_size() const;
  std::uint64_t header_size() const;  ///< N, the JSON length
  /// Entries in data order (sorted by begin offset).
  const std::vector<SafetensorsEntry>& entries() const;
  const SafetensorsEntry* find(const std::string& name) const;
  /// The __metadata__ object (string to string); empty when absent.
  const std::map<std::string, std::string>& metadata() const;
  /// Non-fatal findings, e.g. unknown fields in a tensor entry.
  const std::vector<std::string>& warnings() const;

  /// The raw bytes of an entry (any dtype), a span into the mapping.
  std::span<const std::byte> bytes(const SafetensorsEntry& entry) const;
  /// A view of a loadable tensor. Throws InvalidInput when `name` is absent and Unsupported, naming
  /// the dtype, when its dtype is not BF16, F16 or F32.
  TensorView view(const std::string& name) const;
  TensorView view(const SafetensorsEntry& entry) const;

 private:
  struct State;
  explicit SafetensorsFile(std::shared_ptr<const State> state);
  std::shared_ptr<const State> m_state;
};

/// What the writer needs to know about a tensor before its bytes arrive.
struct SafetensorsTensorSpec {
  std::string name;
  std::string dtype;  ///< a safetensors dtype name (any known one, so tests can write I64 etc.)
  std::vector<std::int64_t> shape;
};

/// A tensor whose bytes are already in memory.
struct SafetensorsTensor {
  SafetensorsTensorSpec spec;
  std::span<const std::byte> bytes;
};

/// Streams a safetensors file: the header is written from the specs first, then each tensor's bytes
/// are appended in spec order, in as many chunks as the caller likes, so a multi-GB file never sits
/// in memory. Writes go to a temporary file in the target's directory; finish() checks that every
/// byte arrived, fsyncs and renames it into place. Destroying an unfinished writer deletes the
/// temporary file, so a failed generation never leaves a half-written checkpoint behind.
class SafetensorsWriter {
 public:
  /// Throws InvalidInput on duplicate/empty names, unknown dtypes or overflowing shapes; Io when
  /// the temporary file cannot be created. The JSON header is padded with spaces to 8 bytes (as
  /// Hugging Face does), so data starts 8-aligned; tensors are laid out in the order given.
  SafetensorsWriter(const std::filesystem::path& path, std::vector<SafetensorsTensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  /// Appends bytes of the current tensor; moves to the next one when it is complete. Throws
  /// InvalidInput when `bytes` runs past the current tensor's end (chunks never span tensors).
  void append(std::span<const std::byte> bytes);
  /// Index (in spec order) of the tensor the next append() writes to; == tensor count when done.
  std::size_t current_tensor() const;
  std::uint64_t remaining_in_current_tensor() const;
  /// Completes the file: throws InvalidInput if a tensor is short, Io if flush, fsync or rename fail.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// Writes a whole file in one call. Tensors are ordered as the Hugging Face writer orders them
/// (largest item size first, then by name) so that every tensor is aligned to its item size.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Byte count of a tensor, or throws InvalidInput (naming `what`) on overflow or unknown dtype.
std::uint64_t safetensors_byte_size(const std::string& dtype, std::span<const std::int64_t> shape,
                                    const std::string& what);

}  // namespace twell
