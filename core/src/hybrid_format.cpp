// SPDX-License-Identifier: GPL-3.0-or-later
// The hybrid ELL + dense-tail format of TWELL_SPEC.md §3.2, as a CPU reference. A row with at most
// `ell_width` non-zeros lives in its ELL slots (ascending columns); a heavier row claims the next
// tail row and is stored there densely (ReLU applied, bf16-rounded). When the tail is full the row
// is dropped: it reads back as zeros and is counted in dropped_rows, never silently.
#include <algorithm>
#include <string>
#include <vector>

#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/twell_format.hpp"

namespace twell {
namespace {

constexpr std::uint32_t kMaxHybridNeurons = 65536;  // ELL columns are uint16

void check_hybrid_neurons(std::uint32_t neurons, const char* call) {
  if (neurons == 0 || neurons > kMaxHybridNeurons) {
    throw Error(Error::Kind::Unsupported, std::string(call) +
                                              ": the hybrid format needs 1 <= N <= 65536 "
                                              "(uint16 column index), got N = " +
                                              std::to_string(neurons));
  }
}

[[noreturn]] void corrupt_hybrid(const std::string& what) {
  throw Error(Error::Kind::InvalidInput, "hybrid_unpack: corrupt hybrid buffer: " + what);
}

}  // namespace

HybridPacked hybrid_pack(const float* preactivations, std::uint32_t rows, std::uint32_t neurons,
                         std::uint32_t ell_width, std::uint32_t tail_capacity) {
  check_hybrid_neurons(neurons, "hybrid_pack");
  HybridPacked packed;
  packed.rows = rows;
  packed.neurons = neurons;
  packed.ell_width = ell_width;
  packed.tail_capacity = tail_capacity;
  const std::size_t ell_slots = static_cast<std::size_t>(rows) * ell_width;
  packed.ell_columns.assign(ell_slots, 0);
  packed.ell_values.assign(ell_slots, 0);
  packed.row_nnz.assign(rows, 0);
  packed.tail_row_of.assign(rows, -1);

  for (std::uint32_t row = 0; row < rows; ++row) {
    const float* values = preactivations + static_cast<std::size_t>(row) * neurons;
    std::uint32_t nnz = 0;
    for (std::uint32_t column = 0; column < neurons; ++column) nnz += values[column] > 0.0f ? 1u : 0u;
    packed.row_nnz[row] = nnz;
    if (nnz <= ell_width) {
      std::uint16_t* columns = packed.ell_columns.data() + static_cast<std::size_t>(row) * ell_width;
      std::uint16_t* bits = packed.ell_values.data() + static_cast<std::size_t>(row) * ell_width;
      std::uint32_t slot = 0;
      for (std::uint32_t column = 0; column < neurons; ++column) {
        if (!(values[column] > 0.0f)) continue;
        columns[slot] = static_cast<std::uint16_t>(column);
        bits[slot] = float_to_bf16_bits(values[column]);
        ++slot;
      }
    } else if (packed.tail_rows < tail_capacity) {
      packed.tail_row_of[row] = static_cast<std::int32_t>(packed.tail_rows++);
      packed.tail.resize(static_cast<std::size_t>(packed.tail_rows) * neurons);
      float* tail_row = packed.tail.data() + static_cast<std::size_t>(packed.tail_rows - 1) * neurons;
      for (std::uint32_t column = 0; column < neurons; ++column) {
        tail_row[column] = values[column] > 0.0f ? round_to_bf16(values[column]) : 0.0f;
      }
    } else {
      ++packed.dropped_rows;
    }
  }
  return packed;
}

Matrix hybrid_unpack(const HybridPacked& packed) {
  check_hybrid_neurons(packed.neurons, "hybrid_unpack");
  const std::size_t ell_slots = static_cast<std::size_t>(packed.rows) * packed.ell_width;
  if (packed.ell_columns.size() != ell_slots || packed.ell_values.size() != ell_slots ||
      packed.row_nnz.size() != packed.rows || packed.tail_row_of.size() != packed.rows) {
    corrupt_hybrid("array sizes do not match rows = " + std::to_string(packed.rows) +
                   " and ell_width = " + std::to_string(packed.ell_width));
  }
  if (packed.tail_rows > packed.tail_capacity ||
      packed.tail.size() != static_cast<std::size_t>(packed.tail_rows) * packed.neurons) {
    corrupt_hybrid("tail holds " + std::to_string(packed.tail.size()) + " values for " +
                   std::to_string(packed.tail_rows) + " tail rows (capacity " +
                   std::to_string(packed.tail_capacity) + ") of N = " + std::to_string(packed.neurons));
  }

  Matrix dense(packed.rows, packed.neurons);
  std::vector<bool> tail_row_used(packed.tail_rows, false);
  std::vector<bool> seen(packed.neurons, false);
  std::uint32_t heavy_rows_without_tail = 0;
  for (std::uint32_t row = 0; row < packed.rows; ++row) {
    float* out = dense.data.data() + static_cast<std::size_t>(row) * packed.neurons;
    const std::uint32_t nnz = packed.row_nnz[row];
    const std::int32_t tail_row = packed.tail_row_of[row];
    const std::string where = "row " + std::to_string(row);
    if (nnz <= packed.ell_width) {
      if (tail_row != -1)
        corrupt_hybrid(where + " fits the ELL part but is mapped to tail row " + std::to_string(tail_row));
      const std::uint16_t* columns =
          packed.ell_columns.data() + static_cast<std::size_t>(row) * packed.ell_width;
      const std::uint16_t* bits = packed.ell_values.data() + static_cast<std::size_t>(row) * packed.ell_width;
      for (std::uint32_t slot = 0; slot < nnz; ++slot) {
        const std::uint32_t column = columns[slot];
        if (column >= packed.neurons) corrupt_hybrid(where + " stores column " + std::to_string(column));
        if (seen[column]) corrupt_hybrid(where + " stores column " + std::to_string(column) + " twice");
        if ((bits[slot] & 0x8000u) != 0 || bf16_bits_to_float(bits[slot]) != bf16_bits_to_float(bits[slot])) {
          corrupt_hybrid(where + " stores a negative or NaN value at column " + std::to_string(column));
        }
        seen[column] = true;
        out[column] = bf16_bits_to_float(bits[slot]);
      }
      for (std::uint32_t slot = 0; slot < nnz; ++slot) seen[columns[slot]] = false;
    } else if (tail_row >= 0) {
      if (static_cast<std::uint32_t>(tail_row) >= packed.tail_rows || tail_row_used[tail_row]) {
        corrupt_hybrid(where + " maps to tail row " + std::to_string(tail_row) +
                       ", which is out of range or shared");
      }
      tail_row_used[tail_row] = true;
      const float* source = packed.tail.data() + static_cast<std::size_t>(tail_row) * packed.neurons;
      std::uint32_t stored = 0;
      for (std::uint32_t column = 0; column < packed.neurons; ++column) {
        if (source[column] < 0.0f || source[column] != source[column]) {
          corrupt_hybrid(where + "'s tail row holds a negative or NaN value at column " +
                         std::to_string(column));
        }
        stored += source[column] > 0.0f ? 1u : 0u;
        out[column] = source[column];
      }
      if (stored > nnz) {
        corrupt_hybrid(where + "'s tail row holds " + std::to_string(stored) + " non-zeros, row_nnz says " +
                       std::to_string(nnz));
      }
    } else if (tail_row == -1) {
      ++heavy_rows_without_tail;  // dropped: reads back as zeros
    } else {
      corrupt_hybrid(where + " has tail index " + std::to_string(tail_row));
    }
  }
  if (heavy_rows_without_tail != packed.dropped_rows) {
    corrupt_hybrid(std::to_string(heavy_rows_without_tail) +
                   " heavy rows have no tail row but dropped_rows is " + std::to_string(packed.dropped_rows));
  }
  return dense;
}

}  // namespace twell
