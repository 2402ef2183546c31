// SPDX-License-Identifier: GPL-3.0-or-later
// Conversions out of memory-mapped tensor bytes. The bytes may be unaligned for their dtype (files
// written without header padding), so every element is loaded with memcpy, which compilers turn
// into a plain unaligned load.
#include <algorithm>
#include <cstring>

#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/numeric.hpp"

namespace twell {
namespace {

template <typename T>
T load(const std::byte* source, std::size_t index) noexcept {
  T value;
  std::memcpy(&value, source + index * sizeof(T), sizeof(T));
  return value;
}

void check_size(const TensorView& view) {
  const auto expected = static_cast<std::uint64_t>(view.element_count()) * item_size(view.dtype);
  if (view.bytes.size() != expected) {
    throw Error(Error::Kind::Internal, "tensor '" + view.name + "' in " + view.file + " has " +
                                           std::to_string(view.bytes.size()) + " bytes, its shape needs " +
                                           std::to_string(expected));
  }
}

// Cache-blocked transpose of a rows x cols row-major matrix.
Matrix transposed_copy(const std::vector<float>& source, std::size_t rows, std::size_t cols) {
  constexpr std::size_t kBlock = 32;
  Matrix out(cols, rows);
  for (std::size_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (std::size_t c0 = 0; c0 < cols; c0 += kBlock) {
      const std::size_t r_end = std::min(rows, r0 + kBlock), c_end = std::min(cols, c0 + kBlock);
      for (std::size_t r = r0; r < r_end; ++r) {
        for (std::size_t c = c0; c < c_end; ++c) out.data[c * rows + r] = source[r * cols + c];
      }
    }
  }
  return out;
}

}  // namespace

const char* to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::F32:
      return "F32";
  }
  return "?";
}

std::size_t item_size(DType dtype) noexcept {
  return dtype == DType::F32 ? 4 : 2;
}

std::int64_t TensorView::element_count() const {
  std::int64_t count = 1;
  for (const auto extent : shape) count *= extent;
  return count;
}

std::vector<float> TensorView::to_float() const {
  check_size(*this);
  const auto count = static_cast<std::size_t>(element_count());
  std::vector<float> out(count);
  const std::byte* source = bytes.data();
  switch (dtype) {
    case DType::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_bits_to_float(load<std::uint16_t>(source, i));
      break;
    case DType::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = f16_bits_to_float(load<std::uint16_t>(source, i));
      break;
    case DType::F32:
      if (count != 0) std::memcpy(out.data(), source, count * sizeof(float));
      break;
  }
  return out;
}

std::vector<std::uint16_t> TensorView::to_bf16_bits() const {
  check_size(*this);
  const auto count = static_cast<std::size_t>(element_count());
  std::vector<std::uint16_t> out(count);
  const std::byte* source = bytes.data();
  switch (dtype) {
    case DType::BF16:
      if (count != 0) std::memcpy(out.data(), source, count * sizeof(std::uint16_t));
      break;
    case DType::F16:
      // f16 -> f32 is exact, so this rounds once, to nearest even.
      for (std::size_t i = 0; i < count; ++i) {
        out[i] = float_to_bf16_bits(f16_bits_to_float(load<std::uint16_t>(source, i)));
      }
      break;
    case DType::F32:
      for (std::size_t i = 0; i < count; ++i) out[i] = float_to_bf16_bits(load<float>(source, i));
      break;
  }
  return out;
}

const char* to_string(TensorRole role) noexcept {
  switch (role) {
    case TensorRole::Embedding:
      return "embedding";
    case TensorRole::AttnQ:
      return "attn.q";
    case TensorRole::AttnK:
      return "attn.k";
    case TensorRole::AttnV:
      return "attn.v";
    case TensorRole::AttnO:
      return "attn.o";
    case TensorRole::InputNorm:
      return "input_norm";
    case TensorRole::PostAttentionNorm:
      return "post_attention_norm";
    case TensorRole::FfnGate:
      return "ffn.gate";
    case TensorRole::FfnUp:
      return "ffn.up";
    case TensorRole::FfnDown:
      return "ffn.down";
    case TensorRole::FinalNorm:
      return "final_norm";
    case TensorRole::LmHead:
      return "lm_head";
  }
  return "?";
}

Matrix RoleTensor::to_linear_matrix() const {
  if (view == nullptr) throw Error(Error::Kind::Internal, "to_linear_matrix on a role with no tensor");
  auto values = view->to_float();
  if (view->shape.size() == 1) {
    Matrix out;
    out.rows = 1;
    out.cols = values.size();
    out.data = std::move(values);
    return out;
  }
  if (view->shape.size() != 2) {
    throw Error(Error::Kind::InvalidInput, "tensor '" + view->name + "' in " + view->file + " has rank " +
                                               std::to_string(view->shape.size()) + ", expected a matrix");
  }
  const auto rows = static_cast<std::size_t>(view->shape[0]), cols = static_cast<std::size_t>(view->shape[1]);
  if (transposed) return transposed_copy(values, rows, cols);
  Matrix out;
  out.rows = rows;
  out.cols = cols;
  out.data = std::move(values);
  return out;
}

}  // namespace twell
