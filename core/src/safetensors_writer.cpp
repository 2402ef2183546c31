// SPDX-License-Identifier: GPL-3.0-or-later
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "safetensors_dtypes.hpp"
#include "twell/error.hpp"
#include "twell/safetensors.hpp"

namespace twell {
namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

[[noreturn]] void throw_io(const std::filesystem::path& path, const char* call, int error_number) {
  throw Error(Error::Kind::Io, path.string() + ": " + call + " failed: " + std::strerror(error_number));
}

void write_all(int fd, const std::filesystem::path& path, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_io(path, "write", errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
}

// Makes the rename itself durable, not only the file's contents.
void fsync_directory(const std::filesystem::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some file systems do not allow opening directories
  ::fsync(fd);
  ::close(fd);
}

std::string build_header(const std::filesystem::path& path, const std::vector<SafetensorsTensorSpec>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         std::vector<std::uint64_t>& sizes) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    const std::string what = path.string() + ": tensor '" + tensor.name + "'";
    if (tensor.name.empty() || tensor.name == "__metadata__") {
      throw Error(Error::Kind::InvalidInput, path.string() + ": invalid tensor name '" + tensor.name + "'");
    }
    if (!names.insert(tensor.name).second) throw Error(Error::Kind::InvalidInput, what + " is listed twice");
    const std::uint64_t size = safetensors_byte_size(tensor.dtype, tensor.shape, what);
    if (__builtin_add_overflow(offset, size, &offset)) {
      throw Error(Error::Kind::InvalidInput, what + ": total data size overflows 64 bits");
    }
    header[tensor.name] = {
        {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {offset - size, offset}}};
    sizes.push_back(size);
  }
  std::string text = header.dump();
  // Hugging Face pads with spaces so the data buffer starts 8-aligned: with item sizes ordered
  // largest first, every tensor is then aligned to its own item size.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

struct SafetensorsWriter::State {
  std::filesystem::path path;
  std::filesystem::path temporary;
  int fd = -1;
  std::vector<std::uint64_t> sizes;
  std::vector<std::string> names;
  std::size_t current = 0;
  std::uint64_t written_in_current = 0;
  std::vector<std::byte> buffer;
  bool finished = false;

  void flush_buffer() {
    write_all(fd, temporary, buffer);
    buffer.clear();
  }
  void advance_past_complete_tensors() {
    while (current < sizes.size() && written_in_current == sizes[current]) {
      ++current;
      written_in_current = 0;
    }
  }
};

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path,
                                     std::vector<SafetensorsTensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : m_state(std::make_unique<State>()) {
  auto& state = *m_state;
  state.path = path;
  const std::string header = build_header(path, tensors, metadata, state.sizes);
  for (const auto& tensor : tensors) state.names.push_back(tensor.name);

  const auto directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string pattern = (directory / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  state.fd = ::mkstemp(pattern.data());
  if (state.fd < 0) throw_io(pattern, "mkstemp (creating the temporary file)", errno);
  state.temporary = pattern;
  ::fchmod(state.fd, 0644);

  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xffu);
  state.buffer.reserve(kBufferBytes);
  state.buffer.insert(state.buffer.end(), length, length + 8);
  const auto* header_bytes = reinterpret_cast<const std::byte*>(header.data());
  state.buffer.insert(state.buffer.end(), header_bytes, header_bytes + header.size());
  state.advance_past_complete_tensors();  // zero-size tensors need no bytes
}

SafetensorsWriter::~SafetensorsWriter() {
  if (m_state->fd >= 0) ::close(m_state->fd);
  if (!m_state->finished && !m_state->temporary.empty()) ::unlink(m_state->temporary.c_str());
}

void SafetensorsWriter::append(std::span<const std::byte> bytes) {
  auto& state = *m_state;
  if (bytes.empty()) return;
  if (state.finished || state.current == state.sizes.size()) {
    throw Error(Error::Kind::InvalidInput, state.path.string() + ": " + std::to_string(bytes.size()) +
                                               " bytes appended after the last tensor");
  }
  const std::uint64_t remaining = state.sizes[state.current] - state.written_in_current;
  if (bytes.size() > remaining) {
    throw Error(Error::Kind::InvalidInput, state.path.string() + ": " + std::to_string(bytes.size()) +
                                               " bytes appended to tensor '" + state.names[state.current] +
                                               "', which has only " + std::to_string(remaining) +
                                               " bytes left");
  }
  if (state.buffer.size() + bytes.size() > kBufferBytes) state.flush_buffer();
  if (bytes.size() >= kBufferBytes) {
    write_all(state.fd, state.temporary, bytes);
  } else {
    state.buffer.insert(state.buffer.end(), bytes.begin(), bytes.end());
  }
  state.written_in_current += bytes.size();
  state.advance_past_complete_tensors();
}

std::size_t SafetensorsWriter::current_tensor() const {
  return m_state->current;
}

std::uint64_t SafetensorsWriter::remaining_in_current_tensor() const {
  const auto& state = *m_state;
  return state.current == state.sizes.size() ? 0 : state.sizes[state.current] - state.written_in_current;
}

void SafetensorsWriter::finish() {
  auto& state = *m_state;
  if (state.finished) return;
  if (state.current != state.sizes.size()) {
    throw Error(Error::Kind::InvalidInput, state.path.string() + ": tensor '" + state.names[state.current] +
                                               "' is missing " +
                                               std::to_string(remaining_in_current_tensor()) +
                                               " bytes (finish() called before all data was appended)");
  }
  state.flush_buffer();
  if (::fsync(state.fd) != 0) throw_io(state.temporary, "fsync", errno);
  const int fd = state.fd;
  state.fd = -1;
  if (::close(fd) != 0) throw_io(state.temporary, "close", errno);
  if (::rename(state.temporary.c_str(), state.path.c_str()) != 0) throw_io(state.path, "rename", errno);
  state.finished = true;
  fsync_directory(state.path.has_parent_path() ? state.path.parent_path() : std::filesystem::path("."));
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorsTensor*> ordered;
  for (const auto& tensor : tensors) ordered.push_back(&tensor);
  auto bits_of = [](const SafetensorsTensor* tensor) {
    const auto* info = safetensors_detail::find_dtype(tensor->spec.dtype);
    return info == nullptr ? 0u : info->bits;
  };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const SafetensorsTensor* a, const SafetensorsTensor* b) {
                     const unsigned bits_a = bits_of(a), bits_b = bits_of(b);
                     return bits_a != bits_b ? bits_a > bits_b : a->spec.name < b->spec.name;
                   });
  std::vector<SafetensorsTensorSpec> specs;
  for (const auto* tensor : ordered) {
    const std::string what = path.string() + ": tensor '" + tensor->spec.name + "'";
    const std::uint64_t expected = safetensors_byte_size(tensor->spec.dtype, tensor->spec.shape, what);
    if (tensor->bytes.size() != expected) {
      throw Error(Error::Kind::InvalidInput, what + " has " + std::to_string(tensor->bytes.size()) +
                                                 " bytes but its shape needs " + std::to_string(expected));
    }
    specs.push_back(tensor->spec);
  }
  SafetensorsWriter writer(path, std::move(specs), metadata);
  for (const auto* tensor : ordered) writer.append(tensor->bytes);
  writer.finish();
}

}  // namespace twell
