// SPDX-License-Identifier: GPL-3.0-or-later
#include "cpu_ffn_stages.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu_vector.hpp"
#include "reference_parallel.hpp"
#include "twell/error.hpp"
#include "twell/reference_ffn.hpp"

// The sparse consumer's dot products and row updates are compiled for AVX-512 and AVX2 as well as
// the baseline (TWELL_CPU_CLONES), as the reference GEMM is.

namespace twell::cpu {
namespace {

void check_layer(const FfnLayerView& layer, const Matrix& x) {
  if (layer.up == nullptr || layer.down == nullptr)
    throw Error(Error::Kind::Internal, "FFN stage: missing weights");
  if (x.cols != layer.up->cols) {
    throw Error(Error::Kind::InvalidInput, "FFN input has " + std::to_string(x.cols) +
                                               " columns but the layer's hidden size is " +
                                               std::to_string(layer.up->cols));
  }
}

float silu(float value) {
  return value / (1.0f + std::exp(-value));
}

// A few overflowing rows are cheaper as matrix-vector products than through the GEMM, whose
// per-call packing of the whole weight would dominate.
constexpr std::size_t kGemmRows = 16;
constexpr std::size_t kWeightRowsPerItem = 64;  // weight rows per work item of the few-rows product

// Written as a plain float[8] loop, GCC vectorised the dot product's products but added them to
// the eight partial sums one scalar at a time, to keep their order: the sums live in Float8 lanes.
using cpu_vector::Float8;
using cpu_vector::horizontal_sum;
using cpu_vector::load8;

/// Four vector partial sums: four independent chains of vector multiply-adds, so the loop is not
/// bound by the latency of one.
TWELL_CPU_CLONES float dot(const float* a, const float* b, std::size_t count) {
  Float8 partial[4] = {};
  std::size_t i = 0;
  for (; i + 32 <= count; i += 32)
    for (std::size_t k = 0; k < 4; ++k) {
      Float8 av, bv;
      load8(av, a + i + 8 * k);
      load8(bv, b + i + 8 * k);
      partial[k] += av * bv;
    }
  for (; i + 8 <= count; i += 8) {
    Float8 av, bv;
    load8(av, a + i);
    load8(bv, b + i);
    partial[0] += av * bv;
  }
  float sum = horizontal_sum((partial[0] + partial[1]) + (partial[2] + partial[3]));
  for (; i < count; ++i) sum += a[i] * b[i];
  return sum;
}

/// dot(a[r], b, count) for four rows a[0..3] at once, one vector partial sum per row: b is loaded
/// once for the four rows.
TWELL_CPU_CLONES void dot_four(const float* const (&a)[4], const float* b, std::size_t count,
                               float (&sums)[4]) {
  Float8 partial[4] = {};
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    Float8 bv;
    load8(bv, b + i);
    for (std::size_t r = 0; r < 4; ++r) {
      Float8 av;
      load8(av, a[r] + i);
      partial[r] += av * bv;
    }
  }
  for (std::size_t r = 0; r < 4; ++r) {
    float sum = horizontal_sum(partial[r]);
    for (std::size_t k = i; k < count; ++k) sum += a[r][k] * b[k];
    sums[r] = sum;
  }
}

/// out = a * w^T for a few rows of `a`; each weight row is read once, against every row of `a`.
/// Many rows go through the GEMM instead.
void few_rows_times_weight_t(const Matrix& a, const Matrix& w, Matrix& out, unsigned threads) {
  if (a.rows >= kGemmRows) {
    reference::matmul_nt(a, w, out, threads);
    return;
  }
  out = Matrix(a.rows, w.rows);
  const std::size_t items = (w.rows + kWeightRowsPerItem - 1) / kWeightRowsPerItem;
  reference::detail::parallel_for(items, threads, [&](std::size_t item, unsigned) {
    const std::size_t end = std::min(w.rows, (item + 1) * kWeightRowsPerItem);
    for (std::size_t j = item * kWeightRowsPerItem; j < end; ++j) {
      const float* weight_row = w.row(j).data();
      std::size_t i = 0;
      for (; i + 4 <= a.rows; i += 4) {
        const float* const rows[4] = {a.row(i).data(), a.row(i + 1).data(), a.row(i + 2).data(),
                                      a.row(i + 3).data()};
        float sums[4];
        dot_four(rows, weight_row, a.cols, sums);
        for (std::size_t r = 0; r < 4; ++r) out.at(i + r, j) = sums[r];
      }
      for (; i < a.rows; ++i) out.at(i, j) = dot(a.row(i).data(), weight_row, a.cols);
    }
  });
}

/// Accumulates one row's contributions: for each stored (column, value) of a row, the up dot
/// product and the down update.
TWELL_CPU_CLONES void accumulate_row(const float* x_row, const float* gate_pre_row,
                                     const std::uint32_t* row_words, std::uint32_t tiles, std::uint32_t slots,
                                     const float* up, const float* down_t, std::size_t d, bool gated,
                                     float* out_row) {
  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    const std::uint32_t* tile_words = row_words + static_cast<std::size_t>(tile) * slots;
    const std::uint32_t count = tile_words[0];
    for (std::uint32_t e = 1; e <= count; ++e) {
      const std::uint32_t word = tile_words[e];
      const std::size_t column = word & 0xffffu;
      float h = gate_pre_row[column];  // fp32: the exact value whose bf16 rounding is stored
      if (gated) h *= dot(x_row, up + column * d, d);
      const float* down_row = down_t + column * d;
      for (std::size_t i = 0; i < d; ++i) out_row[i] += h * down_row[i];
    }
  }
}

}  // namespace

void dense_gate_up(const Matrix& x, const FfnLayerView& layer, Matrix& gate_pre, Matrix& hidden,
                   unsigned threads) {
  check_layer(layer, x);
  if (layer.gate == nullptr) {
    reference::matmul_nt(x, *layer.up, gate_pre, threads);
    hidden = gate_pre;
    for (float& value : hidden.data) value = value > 0.0f ? value : 0.0f;
    return;
  }
  reference::matmul_nt(x, *layer.gate, gate_pre, threads);
  reference::matmul_nt(x, *layer.up, hidden, threads);
  const bool relu = layer.activation == Activation::Relu;
  const unsigned product_threads = hidden.data.size() < (std::size_t{1} << 18) ? 1u : threads;
  reference::detail::parallel_for(hidden.rows, product_threads, [&](std::size_t r, unsigned) {
    const auto gate_row = gate_pre.row(r);
    auto hidden_row = hidden.row(r);
    for (std::size_t c = 0; c < hidden.cols; ++c) {
      const float g = gate_row[c];
      const float activated = relu ? (g > 0.0f ? g : 0.0f) : silu(g);
      hidden_row[c] *= activated;
    }
  });
}

void dense_down(const Matrix& hidden, const FfnLayerView& layer, Matrix& out, unsigned threads) {
  reference::matmul_nt(hidden, *layer.down, out, threads);
}

TwellPacked twell_gate_pack(const Matrix& x, const FfnLayerView& layer, std::uint32_t compression,
                            Matrix& gate_pre, unsigned threads) {
  check_layer(layer, x);
  if (layer.gate != nullptr && layer.activation != Activation::Relu) {
    throw Error(Error::Kind::Unsupported, std::string("the TwELL FFN needs a ReLU gate; this layer uses ") +
                                              to_string(layer.activation));
  }
  reference::matmul_nt(x, layer.gate != nullptr ? *layer.gate : *layer.up, gate_pre, threads);
  return twell_pack(gate_pre.data.data(), static_cast<std::uint32_t>(gate_pre.rows),
                    static_cast<std::uint32_t>(gate_pre.cols), compression);
}

void twell_up_down(const Matrix& x, const TwellPacked& packed, const Matrix& gate_pre,
                   const FfnLayerView& layer, Matrix& out, unsigned threads) {
  check_layer(layer, x);
  if (gate_pre.rows != x.rows || gate_pre.cols != packed.neurons || packed.rows != x.rows) {
    throw Error(Error::Kind::Internal, "twell_up_down: packed activations do not match the input");
  }
  if (layer.down_t == nullptr)
    throw Error(Error::Kind::Internal, "twell_up_down: no transposed down projection");
  const std::size_t d = x.cols;
  out = Matrix(x.rows, d);
  std::vector<bool> overflowing(x.rows, false);
  for (const std::uint32_t row : packed.overflow_rows) overflowing[row] = true;
  const std::uint32_t tiles = packed.tiles();
  const std::uint32_t slots = packed.slots_per_tile();
  const std::size_t words_per_row = packed.words_per_row();
  const bool gated = layer.gate != nullptr;
  reference::detail::parallel_for(x.rows, threads, [&](std::size_t r, unsigned) {
    if (overflowing[r]) return;
    accumulate_row(x.row(r).data(), gate_pre.row(r).data(), packed.words.data() + r * words_per_row, tiles,
                   slots, layer.up->data.data(), layer.down_t->data.data(), d, gated, out.row(r).data());
  });
}

void twell_overflow_dense(const Matrix& x, const TwellPacked& packed, const Matrix& gate_pre,
                          const FfnLayerView& layer, Matrix& out, unsigned threads) {
  const std::size_t rows = packed.overflow_rows.size();
  if (rows == 0) return;
  const std::size_t d = x.cols;
  const std::size_t n = gate_pre.cols;
  const bool gated = layer.gate != nullptr;
  const bool relu = layer.activation == Activation::Relu;
  // The gate GEMM already ran over every row in gate_pack; the fallback needs up and down only.
  Matrix gathered(rows, d), activated(rows, n);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto source = x.row(packed.overflow_rows[i]);
    std::copy(source.begin(), source.end(), gathered.row(i).begin());
  }
  Matrix up_pre;
  if (gated) few_rows_times_weight_t(gathered, *layer.up, up_pre, threads);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto gate_row = gate_pre.row(packed.overflow_rows[i]);
    auto hidden_row = activated.row(i);
    for (std::size_t j = 0; j < n; ++j) {
      const float g = gate_row[j];
      const float a = (relu || !gated) ? (g > 0.0f ? g : 0.0f) : silu(g);
      hidden_row[j] = gated ? a * up_pre.at(i, j) : a;
    }
  }
  Matrix result;
  few_rows_times_weight_t(activated, *layer.down, result, threads);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto source = result.row(i);
    std::copy(source.begin(), source.end(), out.row(packed.overflow_rows[i]).begin());
  }
}

}  // namespace twell::cpu
