// SPDX-License-Identifier: GPL-3.0-or-later
#include "cpu_ffn_stages.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "reference_parallel.hpp"
#include "twell/error.hpp"
#include "twell/reference_ffn.hpp"

// The sparse consumer's dot products and row updates are compiled for AVX-512 and AVX2 as well as
// the baseline, picked at load time, as the reference GEMM is.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TWELL_STAGE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TWELL_STAGE_CLONES
#endif

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
constexpr std::size_t kGemvBlock = 256;  // output elements per work item

/// Eight partial sums so the loop vectorises without reassociation flags.
TWELL_STAGE_CLONES float dot(const float* a, const float* b, std::size_t count) {
  float partial[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (std::size_t lane = 0; lane < 8; ++lane) partial[lane] += a[i + lane] * b[i + lane];
  float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
              ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  for (; i < count; ++i) sum += a[i] * b[i];
  return sum;
}

/// Accumulates one row's contributions: for each stored (column, value) of a row, the up dot
/// product and the down update.
TWELL_STAGE_CLONES void accumulate_row(const float* x_row, const float* gate_pre_row,
                                       const std::uint32_t* row_words, std::uint32_t tiles,
                                       std::uint32_t slots, const float* up, const float* down_t,
                                       std::size_t d, bool gated, float* out_row) {
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
  if (gated) {
    if (rows >= kGemmRows) {
      reference::matmul_nt(gathered, *layer.up, up_pre, threads);
    } else {
      up_pre = Matrix(rows, n);
      reference::detail::parallel_for(rows * n / kGemvBlock + 1, threads, [&](std::size_t block, unsigned) {
        for (std::size_t e = block * kGemvBlock; e < std::min(rows * n, (block + 1) * kGemvBlock); ++e)
          up_pre.data[e] = dot(gathered.row(e / n).data(), layer.up->row(e % n).data(), d);
      });
    }
  }
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
  if (rows >= kGemmRows) {
    reference::matmul_nt(activated, *layer.down, result, threads);
  } else {
    result = Matrix(rows, d);
    reference::detail::parallel_for(rows * d / kGemvBlock + 1, threads, [&](std::size_t block, unsigned) {
      for (std::size_t e = block * kGemvBlock; e < std::min(rows * d, (block + 1) * kGemvBlock); ++e)
        result.data[e] = dot(activated.row(e / d).data(), layer.down->row(e % d).data(), n);
    });
  }
  for (std::size_t i = 0; i < rows; ++i) {
    const auto source = result.row(i);
    std::copy(source.begin(), source.end(), out.row(packed.overflow_rows[i]).begin());
  }
}

}  // namespace twell::cpu
