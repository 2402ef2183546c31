// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/kernel_variant.hpp"

namespace twell {
namespace {

// The index just past the bracketed group that ends at `close` (a '>' or ')'), scanning back to
// its opening bracket; npos when the brackets do not balance.
std::size_t opening_of(std::string_view text, std::size_t close) {
  const char closer = text[close];
  const char opener = closer == '>' ? '<' : '(';
  int depth = 0;
  for (std::size_t i = close + 1; i-- > 0;) {
    if (text[i] == closer) ++depth;
    if (text[i] == opener && --depth == 0) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::string_view kernel_function_name(std::string_view name) {
  std::string_view rest = name;
  // The parameter list: the last balanced (...) at the end. "(anonymous namespace)" inside the
  // qualified name is never at the end of a demangled signature.
  if (!rest.empty() && rest.back() == ')') {
    const std::size_t open = opening_of(rest, rest.size() - 1);
    if (open == std::string_view::npos || open == 0) return name;
    rest = rest.substr(0, open);
  }
  if (!rest.empty() && rest.back() == '>') {
    const std::size_t open = opening_of(rest, rest.size() - 1);
    if (open == std::string_view::npos || open == 0) return name;
    rest = rest.substr(0, open);
  }
  // The unqualified name follows the last "::" or, without a scope, the return type's space.
  if (const std::size_t scope = rest.rfind("::"); scope != std::string_view::npos) {
    rest = rest.substr(scope + 2);
  } else if (const std::size_t space = rest.rfind(' '); space != std::string_view::npos) {
    rest = rest.substr(space + 1);
  }
  return rest.empty() ? name : rest;
}

const KernelVariant* find_kernel_variant(const std::vector<KernelVariant>& variants,
                                         const KernelRecord& record) {
  if (record.kind != "kernel" && record.kind != "cpu") return nullptr;
  const std::string_view function = kernel_function_name(record.name);
  // One kernel may serve several ops (the consumer also runs the sparse overflow route): the entry
  // for the record's op describes it best.
  for (const KernelVariant& variant : variants)
    if (!variant.library && variant.name == function && variant.op == record.tag.op) return &variant;
  for (const KernelVariant& variant : variants)
    if (!variant.library && variant.name == function) return &variant;
  for (const KernelVariant& variant : variants)
    if (variant.library && !record.tag.op.empty() && variant.op == record.tag.op) return &variant;
  return nullptr;
}

}  // namespace twell
