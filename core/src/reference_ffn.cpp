// SPDX-License-Identifier: GPL-3.0-or-later
// The reference FFNs: the oracle the GPU FFN kernels are compared against.
//
// Where each precision rounds to bf16 ("rb" below = round to nearest even bf16, exact widening back
// to fp32). GEMMs accumulate in fp32 and their products of bf16 operands are exact in fp32, which is
// what the tensor cores compute; only the summation order differs from the GPU's.
//
// Dense FFN, y = (act(x Wg^T) * (x Wu^T)) Wd^T (non-gated: y = act(x Wu^T) Wd^T):
//   Fp32          no rounding anywhere; x and the weights are used as given.
//   Bf16Emulated  x, Wg, Wu, Wd rounded to bf16 (a no-op for bf16-exact data);
//                 g = rb(x Wg^T), u = rb(x Wu^T)                  (GEMM outputs stored as bf16)
//                 h = rb(act(g) * u), act and product in fp32    (the fused act-mul kernel)
//                 non-gated: h = rb(act(u)) (exact for ReLU)
//                 y = rb(h Wd^T)                                  (down GEMM output stored as bf16)
//   Highest       x and the weights rounded to bf16; g, u, h, the down GEMM all fp32; y = rb(y).
//
// TwELL FFN, gate GEMM + ReLU + pack, then per stored entry (j, g) of row m (TWELL_SPEC §2.1-§2.3):
//   pack          a = x Wg^T in fp32; stored iff a > 0 (tested before rounding); stored g = rb(a).
//   Fp32          x, weights as given; the consumer visits the packed columns but takes g = a (the
//                 fp32 value), so the result equals the dense fp32 FFN up to summation order.
//                 u = sum_k x[k] Wu[j,k] (fp32); h = g * u; acc += h * DOWN[j,:] (fp32); y = acc.
//   Bf16Emulated  x, weights rounded to bf16; g = the stored bf16 value;
//                 u = sum_k rb(x[k] * Wu[j,k]) in fp32           (hmul2 products, widened, summed)
//                 h = rb(g * rb(u))                               (bf16 multiply)
//                 acc[d] += rb(h * DOWN[j,d]) in fp32             (hmul2 products, fp32 accumulators)
//                 y = rb(acc)
//   Highest       x, weights rounded to bf16; g = the stored bf16 value; u = sum_k x[k] Wu[j,k] fp32;
//                 h = g * u fp32 (u not rounded); acc[d] += h * DOWN[j,d] fp32; y = rb(acc).
//   Non-gated     the packed value v (a = x Wu^T) replaces h: Fp32 uses v = a; Bf16Emulated
//                 acc[d] += rb(v * DOWN[j,d]), y = rb(acc); Highest acc[d] += v * DOWN[j,d], y = rb(acc).
//   Overflow      rows listed in packed.overflow_rows are recomputed by dense_ffn (ReLU) at the same
//                 precision, so they follow the dense FFN's rounding above.
// Sums run in a fixed order (each output element over its neurons ascending, which is the order of
// the entries in a packed row; dot products over 16 fp32 lanes, then the lanes in order), so CPU
// results are deterministic and independent of the thread count.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "reference_parallel.hpp"
#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/reference_ffn.hpp"

namespace twell::reference {
namespace {

constexpr std::size_t kDotLanes = 16;

/// The caller's matrix, or a bf16-rounded copy of it when rounding is asked for and changes it.
class Operand {
 public:
  Operand(const Matrix& matrix, bool round_to_bf16_inputs) : m_matrix(&matrix) {
    if (!round_to_bf16_inputs) return;
    const bool exact = std::all_of(matrix.data.begin(), matrix.data.end(), [](float value) {
      return (std::bit_cast<std::uint32_t>(value) & 0xffffu) == 0u;
    });
    if (exact) return;
    m_copy = matrix;
    for (float& value : m_copy.data) value = round_to_bf16(value);
    m_matrix = &m_copy;
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;
  const Matrix& get() const { return *m_matrix; }

 private:
  const Matrix* m_matrix;
  Matrix m_copy;
};

Matrix transposed(const Matrix& source) {
  Matrix out(source.cols, source.rows);
  for (std::size_t r = 0; r < source.rows; ++r)
    for (std::size_t c = 0; c < source.cols; ++c)
      out.data[c * source.rows + r] = source.data[r * source.cols + c];
  return out;
}

std::string shape_text(const Matrix& m) {
  std::string text = "[";
  text += std::to_string(m.rows);
  text += ", ";
  text += std::to_string(m.cols);
  return text + "]";
}

void expect_shape(const Matrix& m, std::size_t rows, std::size_t cols, const char* call, const char* name) {
  if (m.rows != rows || m.cols != cols || m.data.size() != rows * cols) {
    throw Error(Error::Kind::InvalidInput, std::string(call) + ": " + name + " is " + shape_text(m) +
                                               ", expected [" + std::to_string(rows) + ", " +
                                               std::to_string(cols) + "]");
  }
}

/// Checks x and the weights against each other; returns N.
std::size_t check_ffn_shapes(const Matrix& x, const FfnWeights& weights, const char* call) {
  if (weights.up == nullptr)
    throw Error(Error::Kind::InvalidInput, std::string(call) + ": the up weight is missing");
  if (weights.down == nullptr && weights.down_t == nullptr) {
    throw Error(Error::Kind::InvalidInput,
                std::string(call) + ": the down weight is missing (down and down_t are null)");
  }
  if (x.data.size() != x.rows * x.cols) {
    throw Error(Error::Kind::InvalidInput, std::string(call) + ": x " + shape_text(x) + " holds " +
                                               std::to_string(x.data.size()) + " values");
  }
  const std::size_t hidden = x.cols;
  const std::size_t neurons = weights.up->rows;
  expect_shape(*weights.up, neurons, hidden, call, "up weight");
  if (weights.gate != nullptr) expect_shape(*weights.gate, neurons, hidden, call, "gate weight");
  if (weights.down != nullptr) expect_shape(*weights.down, hidden, neurons, call, "down weight");
  if (weights.down_t != nullptr) expect_shape(*weights.down_t, neurons, hidden, call, "down_t weight");
  return neurons;
}

float activate(float value, Activation activation) {
  if (activation == Activation::Relu) return value > 0.0f ? value : 0.0f;
  return value / (1.0f + std::exp(-value));
}

void round_all(Matrix& m, unsigned threads) {
  constexpr std::size_t kChunk = 1 << 16;
  detail::parallel_for((m.data.size() + kChunk - 1) / kChunk, threads, [&](std::size_t chunk, unsigned) {
    const std::size_t end = std::min(m.data.size(), (chunk + 1) * kChunk);
    for (std::size_t i = chunk * kChunk; i < end; ++i) m.data[i] = round_to_bf16(m.data[i]);
  });
}

/// hidden[i] = combine(gate[i], hidden[i]) over row chunks.
template <typename Combine>
void combine_elementwise(const Matrix& gate, Matrix& hidden, unsigned threads, Combine combine) {
  constexpr std::size_t kChunk = 1 << 14;
  detail::parallel_for((hidden.data.size() + kChunk - 1) / kChunk, threads, [&](std::size_t chunk, unsigned) {
    const std::size_t end = std::min(hidden.data.size(), (chunk + 1) * kChunk);
    for (std::size_t i = chunk * kChunk; i < end; ++i) hidden.data[i] = combine(gate.data[i], hidden.data[i]);
  });
}

float dot_fp32(const float* x, const float* w, std::size_t n) {
  float lanes[kDotLanes] = {};
  std::size_t k = 0;
  for (; k + kDotLanes <= n; k += kDotLanes)
    for (std::size_t l = 0; l < kDotLanes; ++l) lanes[l] += x[k + l] * w[k + l];
  for (std::size_t l = 0; k < n; ++k, ++l) lanes[l] += x[k] * w[k];
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

float dot_bf16_products(const float* x, const float* w, std::size_t n) {
  float lanes[kDotLanes] = {};
  std::size_t k = 0;
  for (; k + kDotLanes <= n; k += kDotLanes)
    for (std::size_t l = 0; l < kDotLanes; ++l) lanes[l] += round_to_bf16(x[k + l] * w[k + l]);
  for (std::size_t l = 0; k < n; ++k, ++l) lanes[l] += round_to_bf16(x[k] * w[k]);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

void axpy_fp32(float* acc, float h, const float* w, std::size_t n) {
  for (std::size_t d = 0; d < n; ++d) acc[d] += h * w[d];
}

void axpy_bf16_products(float* acc, float h, const float* w, std::size_t n) {
  for (std::size_t d = 0; d < n; ++d) acc[d] += round_to_bf16(h * w[d]);
}

/// The stored entries of the rows the sparse path handles, regrouped by neuron: entries
/// [first[j], first[j + 1]) fired neuron j, in ascending row order. `value` starts as the gate
/// value (h for the non-gated FFN) and becomes h once the up products are applied.
struct EntriesByNeuron {
  std::vector<std::size_t> first;  // N + 1
  std::vector<std::uint32_t> row;
  std::vector<float> value;
};

EntriesByNeuron group_by_neuron(const TwellPacked& packed, const Matrix& preactivation, Precision precision,
                                const std::vector<bool>& skip_row) {
  EntriesByNeuron entries;
  entries.first.assign(static_cast<std::size_t>(packed.neurons) + 1, 0);
  const auto for_each_entry = [&](auto&& visit) {
    for (std::uint32_t m = 0; m < packed.rows; ++m) {
      if (skip_row[m]) continue;
      const std::uint32_t* words = packed.words.data() + static_cast<std::size_t>(m) * packed.words_per_row();
      for (std::uint32_t tile = 0; tile < packed.tiles(); ++tile) {
        const std::uint32_t* tile_words = words + tile * packed.slots_per_tile();
        for (std::uint32_t slot = 1; slot <= tile_words[0]; ++slot) visit(m, tile_words[slot]);
      }
    }
  };
  for_each_entry([&](std::uint32_t, std::uint32_t word) { ++entries.first[(word & 0xffffu) + 1]; });
  for (std::size_t j = 0; j < packed.neurons; ++j) entries.first[j + 1] += entries.first[j];
  entries.row.resize(entries.first.back());
  entries.value.resize(entries.first.back());
  std::vector<std::size_t> next(entries.first.begin(), entries.first.end() - 1);
  for_each_entry([&](std::uint32_t m, std::uint32_t word) {
    const std::uint32_t column = word & 0xffffu;
    const std::size_t at = next[column]++;
    entries.row[at] = m;
    entries.value[at] = precision == Precision::Fp32
                            ? preactivation.at(m, column)
                            : bf16_bits_to_float(static_cast<std::uint16_t>(word >> 16));
  });
  return entries;
}

/// The sparse part of the TwELL FFN. The GPU runs it row by row (one warp per token); here it runs
/// neuron by neuron so each weight row is read once per call instead of once per firing token, in
/// two phases: h for every entry (up dot products, threads over neurons), then the down
/// accumulation (threads over slices of the output columns, neurons ascending). Each output
/// element still sums its terms in ascending neuron order, exactly as a per-row consumer would.
void consume_entries(EntriesByNeuron& entries, const Matrix& x, const Matrix* up, const Matrix& down_t,
                     Precision precision, unsigned threads, Matrix& out) {
  const std::size_t hidden = x.cols;
  const std::size_t neurons = entries.first.size() - 1;
  const bool bf16_products = precision == Precision::Bf16Emulated;
  if (up != nullptr) {
    constexpr std::size_t kNeuronsPerItem = 64;
    detail::parallel_for(
        (neurons + kNeuronsPerItem - 1) / kNeuronsPerItem, threads, [&](std::size_t item, unsigned) {
          const std::size_t end = std::min(neurons, (item + 1) * kNeuronsPerItem);
          for (std::size_t j = item * kNeuronsPerItem; j < end; ++j) {
            const float* up_row = up->data.data() + j * hidden;
            for (std::size_t e = entries.first[j]; e < entries.first[j + 1]; ++e) {
              const float* x_row = x.data.data() + static_cast<std::size_t>(entries.row[e]) * hidden;
              const float gate = entries.value[e];
              entries.value[e] =
                  bf16_products
                      ? round_to_bf16(gate * round_to_bf16(dot_bf16_products(x_row, up_row, hidden)))
                      : gate * dot_fp32(x_row, up_row, hidden);
            }
          }
        });
  }
  // A slice of every output row stays in cache while the neurons stream past.
  constexpr std::size_t kSliceWidth = 256;
  detail::parallel_for((hidden + kSliceWidth - 1) / kSliceWidth, threads, [&](std::size_t slice, unsigned) {
    const std::size_t d0 = slice * kSliceWidth;
    const std::size_t width = std::min(kSliceWidth, hidden - d0);
    for (std::size_t j = 0; j < neurons; ++j) {
      const float* down_slice = down_t.data.data() + j * hidden + d0;
      for (std::size_t e = entries.first[j]; e < entries.first[j + 1]; ++e) {
        float* acc = out.data.data() + static_cast<std::size_t>(entries.row[e]) * hidden + d0;
        if (bf16_products) {
          axpy_bf16_products(acc, entries.value[e], down_slice, width);
        } else {
          axpy_fp32(acc, entries.value[e], down_slice, width);
        }
      }
    }
  });
}

}  // namespace

Matrix dense_ffn(const Matrix& x, const FfnWeights& weights, Activation activation, Precision precision,
                 Matrix* gate_preactivation, unsigned threads) {
  check_ffn_shapes(x, weights, "dense_ffn");
  const bool bf16_inputs = precision != Precision::Fp32;
  const bool round_intermediates = precision == Precision::Bf16Emulated;
  const Operand x_in(x, bf16_inputs);

  Matrix hidden;  // u = x Wu^T, then h
  {
    const Operand up(*weights.up, bf16_inputs);
    matmul_nt(x_in.get(), up.get(), hidden, threads);
  }
  if (round_intermediates) round_all(hidden, threads);
  if (weights.gate != nullptr) {
    Matrix gate;
    {
      const Operand gate_weight(*weights.gate, bf16_inputs);
      matmul_nt(x_in.get(), gate_weight.get(), gate, threads);
    }
    if (round_intermediates) round_all(gate, threads);
    combine_elementwise(gate, hidden, threads, [&](float g, float u) {
      const float h = activate(g, activation) * u;
      return round_intermediates ? round_to_bf16(h) : h;
    });
    if (gate_preactivation != nullptr) *gate_preactivation = std::move(gate);
  } else {
    if (gate_preactivation != nullptr) *gate_preactivation = hidden;
    combine_elementwise(hidden, hidden, threads, [&](float, float u) {
      const float h = activate(u, activation);
      return round_intermediates ? round_to_bf16(h) : h;
    });
  }

  Matrix out;
  if (weights.down != nullptr) {
    const Operand down(*weights.down, bf16_inputs);
    matmul_nt(hidden, down.get(), out, threads);
  } else {
    const Matrix down = transposed(*weights.down_t);
    const Operand down_in(down, bf16_inputs);
    matmul_nt(hidden, down_in.get(), out, threads);
  }
  if (precision != Precision::Fp32) round_all(out, threads);
  return out;
}

TwellFfnResult twell_ffn(const Matrix& x, const FfnWeights& weights, std::uint32_t compression,
                         Precision precision, unsigned threads, Matrix* gate_preactivation) {
  const std::size_t neurons = check_ffn_shapes(x, weights, "twell_ffn");
  const bool bf16_inputs = precision != Precision::Fp32;
  const Operand x_in(x, bf16_inputs);
  const Operand up(*weights.up, bf16_inputs);

  Matrix preactivation;  // x Wg^T, or x Wu^T for the non-gated FFN
  if (weights.gate != nullptr) {
    const Operand gate_weight(*weights.gate, bf16_inputs);
    matmul_nt(x_in.get(), gate_weight.get(), preactivation, threads);
  } else {
    matmul_nt(x_in.get(), up.get(), preactivation, threads);
  }

  TwellFfnResult result;
  result.packed = twell_pack(preactivation.data.data(), static_cast<std::uint32_t>(x.rows),
                             static_cast<std::uint32_t>(neurons), compression);

  Matrix down_t_storage;
  if (weights.down_t == nullptr) down_t_storage = transposed(*weights.down);
  const Operand down_t(weights.down_t != nullptr ? *weights.down_t : down_t_storage, bf16_inputs);

  const std::size_t hidden = x.cols;
  result.out = Matrix(x.rows, hidden);
  std::vector<bool> recompute(x.rows, false);
  for (std::uint32_t row : result.packed.overflow_rows) recompute[row] = true;

  EntriesByNeuron entries = group_by_neuron(result.packed, preactivation, precision, recompute);
  consume_entries(entries, x_in.get(), weights.gate != nullptr ? &up.get() : nullptr, down_t.get(), precision,
                  threads, result.out);
  if (precision != Precision::Fp32) round_all(result.out, threads);  // overflow rows are still zero here

  const std::vector<std::uint32_t>& overflow = result.packed.overflow_rows;
  if (!overflow.empty()) {
    Matrix rows_in(overflow.size(), hidden);
    for (std::size_t i = 0; i < overflow.size(); ++i) {
      std::copy_n(x.data.data() + overflow[i] * hidden, hidden, rows_in.data.data() + i * hidden);
    }
    const Matrix rows_out = dense_ffn(rows_in, weights, Activation::Relu, precision, nullptr, threads);
    for (std::size_t i = 0; i < overflow.size(); ++i) {
      std::copy_n(rows_out.data.data() + i * hidden, hidden, result.out.data.data() + overflow[i] * hidden);
    }
  }
  result.overflow_rows = overflow.size();
  if (gate_preactivation != nullptr) *gate_preactivation = std::move(preactivation);
  return result;
}

}  // namespace twell::reference
