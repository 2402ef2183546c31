// SPDX-License-Identifier: GPL-3.0-or-later
#include "safetensors_dtypes.hpp"

#include <limits>

#include "twell/error.hpp"
#include "twell/safetensors.hpp"

namespace twell {

// twellscope's own dtype names are the safetensors spellings.
const char* safetensors_dtype_name(DType dtype) noexcept { return to_string(dtype); }

std::optional<DType> dtype_from_safetensors_name(const std::string& name) noexcept {
  const auto* info = safetensors_detail::find_dtype(name);
  return info == nullptr ? std::nullopt : info->loadable;
}

bool is_known_safetensors_dtype(const std::string& name) noexcept {
  return safetensors_detail::find_dtype(name) != nullptr;
}

std::uint64_t safetensors_byte_size(const std::string& dtype, std::span<const std::int64_t> shape,
                                    const std::string& what) {
  const auto* info = safetensors_detail::find_dtype(dtype);
  if (info == nullptr)
    throw Error(Error::Kind::InvalidInput, what + ": unknown safetensors dtype '" + dtype + "'");
  std::uint64_t bits = info->bits;
  for (const auto extent : shape) {
    if (extent < 0) {
      throw Error(Error::Kind::InvalidInput, what + ": negative dimension " + std::to_string(extent));
    }
    if (__builtin_mul_overflow(bits, static_cast<std::uint64_t>(extent), &bits)) {
      throw Error(Error::Kind::InvalidInput, what + ": shape overflows 64 bits");
    }
  }
  if (bits % 8 != 0) {
    throw Error(Error::Kind::InvalidInput,
                what + ": " + dtype + " data of this shape is not a whole number of bytes");
  }
  return bits / 8;
}

}  // namespace twell
