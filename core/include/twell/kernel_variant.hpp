// SPDX-License-Identifier: GPL-3.0-or-later
// The kernels a backend runs for the FFN ops, each described in one line. Reports carry them, so a
// report opened on a desktop without a GPU still says which code produced each timing.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "twell/tracer.hpp"

namespace twell {

struct KernelVariant {
  std::string name;           ///< the kernel's function name as traces show it, or a library's label
  bool library = false;       ///< a library's kernels (cuBLASLt): their names vary, so they match by op
  std::string path;           ///< "dense" or "twell"
  std::string op;             ///< the trace op its launches are tagged with
  std::string architectures;  ///< where it runs, e.g. "sm_80+"
  std::string description;    ///< one line
  bool operator==(const KernelVariant&) const = default;
};

/// The unqualified function name inside a demangled kernel name, without template arguments or
/// parameters: "void ns::(anonymous namespace)::f<true>(ns::P)" gives "f". Names that are not C++
/// signatures ("nvjet_tst_128x256", "cpu:gate_pack") come back whole.
std::string_view kernel_function_name(std::string_view demangled);

/// The variant that produced `record`: the one named by the record's function name (of the record's
/// op where several are), else the library variant of the record's op. Null when none does, and for records
/// that are not single kernels (regions timed with CUDA events, copies).
const KernelVariant* find_kernel_variant(const std::vector<KernelVariant>& variants,
                                         const KernelRecord& record);

}  // namespace twell
