// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <string>

#include "twell/tracer.hpp"

namespace twell::cuda {

/// The caller's tag with `op` filled in: each launch group of an FFN is attributed to its op.
inline TraceTag with_op(const TraceTag& tag, const char* op) {
  TraceTag tagged = tag;
  tagged.op = op;
  return tagged;
}

}  // namespace twell::cuda
