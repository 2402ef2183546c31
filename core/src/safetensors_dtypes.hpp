// SPDX-License-Identifier: GPL-3.0-or-later
// The dtype names of the safetensors format and their sizes in bits, shared by reader and writer.
#pragma once
#include <array>
#include <optional>
#include <string_view>

#include "twell/checkpoint.hpp"

namespace twell::safetensors_detail {

struct DTypeInfo {
  std::string_view name;
  unsigned bits;  ///< sub-byte float formats (F4, F6_*) pack several elements per byte
  std::optional<DType> loadable;
};

// Every name the format defines, including those added by newer versions of the Rust crate, so an
// unsupported one is reported by name instead of as a malformed header.
inline constexpr std::array<DTypeInfo, 22> kDTypes{{
    {"BOOL", 8, std::nullopt},        {"U8", 8, std::nullopt},          {"I8", 8, std::nullopt},
    {"F8_E5M2", 8, std::nullopt},     {"F8_E4M3", 8, std::nullopt},     {"F8_E8M0", 8, std::nullopt},
    {"F8_E4M3FNUZ", 8, std::nullopt}, {"F8_E5M2FNUZ", 8, std::nullopt}, {"F4", 4, std::nullopt},
    {"F6_E2M3", 6, std::nullopt},     {"F6_E3M2", 6, std::nullopt},     {"I16", 16, std::nullopt},
    {"U16", 16, std::nullopt},        {"F16", 16, DType::F16},          {"BF16", 16, DType::BF16},
    {"I32", 32, std::nullopt},        {"U32", 32, std::nullopt},        {"F32", 32, DType::F32},
    {"F64", 64, std::nullopt},        {"I64", 64, std::nullopt},        {"U64", 64, std::nullopt},
    {"C64", 64, std::nullopt},
}};

inline const DTypeInfo* find_dtype(std::string_view name) noexcept {
  for (const auto& info : kDTypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace twell::safetensors_detail
