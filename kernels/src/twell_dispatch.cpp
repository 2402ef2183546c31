// SPDX-License-Identifier: GPL-3.0-or-later
// What the measurements of resources/benchmarks/ decide per GPU model: the per-layer choice between
// the dense and the TwELL FFN from the break-even densities bench_ffn measured (a conservative
// default where nothing was measured), and the cluster size of the sm_90a gate kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "twell/kernels/cuda_check.hpp"
#include "twell/kernels/ffn.hpp"

namespace twell::cuda {
namespace {

// One measured point: the density at which TwELL (Auto kernels) and dense took the same time,
// interpolated linearly between the two bench_ffn densities around the crossing.
struct BreakEvenPoint {
  const char* gpu_name;  // cudaDeviceProp::name, exactly
  int major, minor;
  int hidden, intermediate;
  std::uint32_t compression;
  bool gated;
  int tokens;
  double density;
  const char* source;  // the benchmark record it comes from
};

// From the H200 runs of bench_ffn with the current default kernels (sm90/per_token_cta, what Auto
// runs): the lowest crossing measured, rounded down to 0.01 %, so the dispatch never picks TwELL
// where a run found it slower. M 131072: 1.062 and 1.055 % (h200-gate-deferred-packing-2026-12-04.json,
// runs 1 and 2) and 1.058 % (h200-ffn-2026-12-04.json); M 16384: 1.090 % (one run,
// h200-ffn-2026-12-03-interleaved.json, with the gate before its two later speed-ups, which can only
// have moved the crossing up). The 2026-12-02 figures (0.72 / 0.81 %) predate the deferred packing.
// H100 80GB HBM3, with the gate on CTA pairs as the runner runs it there, two fresh machines: M 131072
// 1.146 and 1.139 %, M 16384 1.136 and 1.115 % (h100-gate-cluster-pairs-2026-12-05.json,
// h100-validation-2026-12-05.json). With one CTA it had crossed at 1.05-1.12 %. With the consumer's
// split form (the H100's default from M 4096 since 2026-12-06), two fresh machines: M 131072 1.210 and
// 1.193 %, M 16384 1.254 and 1.148 % (h100-up-down-split-form-2026-12-06.json); with h as lists, two
// more fresh machines: M 131072 1.224 and 1.220 %, M 16384 1.177 and 1.259 %
// (h100-up-down-split-lists-2026-12-06.json).
// Decode-sized M (h200-small-m-2026-12-05.json, h100-small-m-2026-12-05.json) with uniform activations
// (bench_ffn) crosses below M 16384 but above zero. With the gate Auto runs (cuBLASLt + pack up to M
// 1024, sm_90a above), lowest crossing of every run and timing slot:
// - H200, one run before the split consumer: 0.256 / 0.255 / 0.326 / 0.805 / 0.769 / 0.934 / 1.095 /
//   1.183 % at M 64 / 128 / 256 / 512 / 1024 / 2048 / 4096 / 8192;
// - H100, final kernels: 0.924 / 0.456 / 0.316 / 0.845 / 0.653 / 0.800 / 0.973 / 1.042 %.
// End to end the picture is worse: on the SparseLM-0.5B-shaped synthetic checkpoint (layers at 0.23-
// 0.63 %, heavy-tailed tokens; h100-e2e-decode-2026-12-05.json) the all-TwELL forward ran 0.60-0.86x
// dense at M 64-2048 on the H100, and the forward following the uniform rows 0.62-0.88x. Below
// M 16384 a few heavy tokens are the consumer's critical path, and uniform inputs never have them.
// So up to M 2048 both cards run dense at every density (rows of 0); from M 4096, where the all-TwELL
// forward won (1.04x at 4096, 1.22x at 8192, 1.27x at 16384), the uniform rows stand.
// The consumer balanced by non-zeros (Auto up to 8 tokens a resident CTA slot) took the all-TwELL
// forward to 0.58 / 0.82 / 0.94 / 1.07x dense at M 256 / 1024 / 2048 / 4096 on the H100
// (h100-balanced-consumer-2026-12-05.json): still below dense up to M 2048, so those rows stay. On
// uniform inputs it costs 2-3 % at M 4096, which moved the H100's crossing there from 0.973 to
// 0.932-0.970 % (three runs), and the row with it. No H200 was lent to measure its shift: its M 4096
// row is scaled by the H100's lowest ratio (0.932 / 0.973), 1.09 -> 1.04 %, erring towards dense.
// With the split consumer (the H100's from M 4096), two runs on each of two fresh machines crossed at
// 0.946-0.982 % at M 4096 and 1.082-1.099 % at M 8192 (h100-break-even-mid-m-2026-12-06.json): the
// H100's rows there moved from 0.93 / 1.04 % to 0.94 / 1.08 %.
// Once the runner stopped putting a memset and a copy between the gate's and the consumer's kernels
// (2026-12-07, h100-side-stream-counters-2026-12-07.json), the all-TwELL forward came near dense up to
// M 2048. On checkpoints generated at 0.25 / 0.5 / 1 / 2 %, dense over TwELL on one warm machine, two
// runs each: 1.05 / 1.02 / 0.71 / 0.70 at M 64, 1.04 / 1.00 / 0.70 / 0.70 at M 128, 0.95 / 0.94 /
// 0.89 / 0.78 at M 256, 1.06 / 1.02 / 0.90 / 0.74 at M 512, 1.06 / 1.01 / 0.88 / 0.68 at M 1024,
// 1.11 / 1.06 / 0.92 / 0.73 at M 2048. A fresh machine then gave 0.89 / 0.99 / 0.91 / 1.00 / 1.03 /
// 1.05 at 0.5 %: only M 1024 and 2048 won in every run, so only their rows moved. In the densities
// the dispatch compares (each layer's, measured on the forward's tokens: layer means 0.43 / 0.42 %
// there at 0.5 %, 0.87 / 0.85 % at 1 %), the lower of the runs' crossings, linear between 0.5 and 1 %,
// is 0.46 % at M 1024 and 0.60 % at M 2048.
// Once the forward stopped copying each layer's counters on its stream (8f7533e,
// h100-forward-counters-2026-12-07.json), M 256 and 512 gained most (they take the unbounded route,
// where that copy sat between the layers): on one machine, two runs, dense over TwELL at 0.25 / 0.5 /
// 1 / 2 % 1.04 / 1.00-1.01 / 0.70 / 0.68-0.69 at M 64, 0.99-1.03 / 1.01 / 0.71 / 0.69-0.70 at M 128,
// 1.03 / 1.00-1.01 / 0.96 / 0.83 at M 256, 1.13-1.14 / 1.08-1.09 / 0.96 / 0.77 at M 512. M 512's row
// moved to 0.50 %, below the crossing of that run (about 0.7 % in the densities compared) for want of a
// second machine; M 64-256 stay dense, where TwELL only tied. The H200's rows stay 0: no H200 was lent
// to measure.
// With the unbounded route at M 64 and 128 too (99ba76c), two more fresh machines gave dense over the
// all-TwELL forward at the 0.5 % checkpoint 1.005-1.057 / 1.052-1.058 (three rounds) and 1.065-1.074 /
// 1.056-1.066 (four rounds) at M 64 / 128 (h100-decode-rows-2026-12-07.json). Rows of 0.42 / 0.45 %
// built from them were then run on a fourth machine: the dispatch forward went 0.992-1.046x dense at
// M 64 and 0.962-1.026x at M 128 (three rounds, 0.25 and 0.5 % checkpoints), and the all-TwELL forward
// lost there at 0.25 % (0.91-0.98x). TwELL ties dense at these M within what machines differ by, so
// the rows stay 0 (dense). The densities the dispatch compares there also sit higher than the
// checkpoints' nominal ones (layer means 0.77 / 0.54 % at M 64 / 128 on the 0.5 % checkpoint: a few
// heavy tokens weigh more in a short batch).
constexpr BreakEvenPoint kMeasured[] = {
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 64, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 128, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 256, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 512, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 1024, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 2048, 0.0, "bench_end_to_end on an H100, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 4096, 0.0104, "bench_ffn, H200, 2026-12-05, x 0.958 (H100)"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 8192, 0.0118, "bench_ffn, H200, 2026-12-05"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 16384, 0.0108, "bench_ffn, H200, 2026-12-03"},
    {"NVIDIA H200", 9, 0, 2048, 5632, 8, true, 131072, 0.0105, "bench_ffn, H200, 2026-12-04"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 64, 0.0, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 128, 0.0, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 256, 0.0, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 512, 0.0050, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 1024, 0.0046, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 2048, 0.0060, "bench_end_to_end, H100, 2026-12-07"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 4096, 0.0094, "bench_ffn, H100, 2026-12-06"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 8192, 0.0108, "bench_ffn, H100, 2026-12-06"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 16384, 0.0117, "bench_ffn, H100, 2026-12-06"},
    {"NVIDIA H100 80GB HBM3", 9, 0, 2048, 5632, 8, true, 131072, 0.0122, "bench_ffn, H100, 2026-12-06"},
};

// Which cluster size ran the gate faster, per GPU model and token count (bench_gate_sm90, gate /
// cuBLAS at D 2048, N 5632, interleaved; 2 = the weight tile multicast to CTA pairs):
// - H100 80GB HBM3, two fresh machines on 2026-12-05 (h100-record-2026-12-05.json,
//   h100-gate-cluster-pairs-2026-12-05.json), pairs against one CTA at 0.5 / 2 / 5 %: M 131072
//   0.970-0.971 / 1.022 / 1.072-1.073 against 1.090-1.099 / 1.106-1.108 / 1.104-1.115; M 16384
//   0.980 / 1.017-1.030 / 1.078 against 1.043-1.058 / 1.077-1.080 / 1.126-1.129.
// - H200, the committed kernel in two alternated runs on 2026-12-05
//   (h200-gate-lane-placing-consumer-2026-12-05.json, runs 2 and 6): M 16384 pairs 0.970 / 1.003-1.017 /
//   1.060-1.070 against 1.004-1.006 / 1.028-1.034 / 1.075-1.076; M 131072 pairs 0.995 / 1.048-1.049 /
//   1.100 against 0.990 / 1.043-1.044 / 1.093-1.096, so one CTA there.
struct GateClusterPoint {
  const char* gpu_name;  // cudaDeviceProp::name, exactly
  int tokens;
  int cluster_size;
};
constexpr GateClusterPoint kGateClusterMeasured[] = {
    {"NVIDIA H100 80GB HBM3", 16384, 2},
    {"NVIDIA H100 80GB HBM3", 131072, 2},
    {"NVIDIA H200", 16384, 2},
    {"NVIDIA H200", 131072, 1},
};

// Whether cuBLASLt's gate GEMM + the pack pass (GateKernel::CublasPack) ran the FFN faster than the
// sm_90a fused gate, per GPU model and token count (bench_ffn, variants cublas_pack/per_token_cta
// against sm90/per_token_cta, FFN totals paired):
// - H200, 2026-12-05 (h200-small-m-2026-12-05.json), gate + pack in us, cuBLAS + pack against sm_90a:
//   M 64 23 against 36, M 256 27 against 35, M 512 35 against 37, M 1024 50 against 59; M 2048 86
//   against 80, M 16384 609 against 485 (the [M, N] workspace's write and read cost more than the
//   fused kernel's idle SMs once there are 16 rows of tiles). FFN paired against dense at 0.1 %:
//   1.158 / 1.369 / 1.504 against 0.860 / 1.302 / 1.316 at M 64 / 512 / 1024; 1.626 against 1.698 at
//   M 2048.
// - H100 80GB HBM3, 2026-12-05 (h100-small-m-2026-12-05.json, run 3): cuBLAS + pack 25-29 against
//   35-38 us at M 64-256, 51-54 against 59-61 at M 1024, 86-89 against 81-84 at M 2048. FFN paired
//   against dense at 0.1 %: 1.238 / 1.216 / 1.204 / 1.429 against 1.119 / 1.097 / 1.131 / 1.270 at
//   M 64 / 128 / 256 / 1024; at M 512 a tie (1.367 / 1.210 / 1.117 against 1.417 / 1.251 / 1.068 at
//   0.1 / 0.25 / 0.5 %), given to cuBLAS so the boundary stays one token count.
//   Re-measured after the gate's lane-order placing and written-out k-blocks (2026-12-06,
//   h100-small-m-gate-boundary-2026-12-06.json, three runs): 27-29 against 35-37 us at M 256, 52-55
//   against 57-61 at M 1024, a tie at M 512, 78-83 against 85-88 for the fused gate at M 2048.
// A yes-or-no choice between two kernels that compute the same thing, measured per GPU model and
// token count.
struct PreferencePoint {
  const char* gpu_name;  // cudaDeviceProp::name, exactly
  int tokens;
  bool preferred;
};
constexpr PreferencePoint kGateCublasPackMeasured[] = {
    {"NVIDIA H200", 64, true},
    {"NVIDIA H200", 128, true},
    {"NVIDIA H200", 256, true},
    {"NVIDIA H200", 512, true},
    {"NVIDIA H200", 1024, true},
    {"NVIDIA H200", 2048, false},
    {"NVIDIA H200", 4096, false},
    {"NVIDIA H200", 8192, false},
    {"NVIDIA H200", 16384, false},
    {"NVIDIA H100 80GB HBM3", 64, true},
    {"NVIDIA H100 80GB HBM3", 128, true},
    {"NVIDIA H100 80GB HBM3", 256, true},
    {"NVIDIA H100 80GB HBM3", 512, true},
    {"NVIDIA H100 80GB HBM3", 1024, true},
    {"NVIDIA H100 80GB HBM3", 2048, false},
    {"NVIDIA H100 80GB HBM3", 4096, false},
    {"NVIDIA H100 80GB HBM3", 8192, false},
};

// Whether the CTA consumer's split form (a kernel writing every h, then one accumulating the down
// rows; twell_up_down.cu) ran faster than the fused kernel, per GPU model and token count: the FFN
// with the fused consumer timed beside it (bench_ffn --split-consumer always).
// - H100 80GB HBM3, 2026-12-06 (h100-up-down-split-form-2026-12-06.json, two fresh machines): the
//   consumer alone at M 131072 4.11-4.13 against 4.65-4.70 ms at 0.5 %, 0.996-0.998x at 1-2 %; the
//   FFN 0.964-0.966x at M 131072 and 0.969-0.970x at M 16384 (0.5 %), 0.984-0.997x at 1-2 %.
//   Below 4225 tokens, where the balanced launch cuts tokens into pieces, it loses
//   (h100-up-down-split-balanced-2026-12-06.json, each point on two fresh machines): FFN 1.05-1.12x at
//   M 256-2048 and 1.004-1.005x at M 4096 (0.5 %), 1.01-1.11x at 1-2 %; with one CTA per token again
//   it wins at 0.5 %: 0.981-0.992 / 0.970-0.980 / 0.973-0.974x at M 6144 / 8192 / 12288
//   (0.998-1.009x at 1-2 %).
//   With h as one list per piece (h100-up-down-split-piece-lists-2026-12-06.json, two fresh machines,
//   alternated with the packed layout), the balanced split wins at 0.5 % from M 3072: 0.977-0.980x at
//   M 3072 and 0.971-0.974x at M 4096 (was 1.002-1.021x), and still loses below (1.010-1.020x at
//   M 1024-2048) and nearer the break-even (1.005-1.016x at 0.75-1 %, M 3072-4096). Taken at M 4096
//   for the low densities TwELL runs at there (its break-even is 0.93 %).
// - H200: not measured (none was lent that day); the fused kernel stays.
constexpr PreferencePoint kUpDownSplitMeasured[] = {
    {"NVIDIA H100 80GB HBM3", 256, false},  {"NVIDIA H100 80GB HBM3", 1024, false},
    {"NVIDIA H100 80GB HBM3", 2048, false}, {"NVIDIA H100 80GB HBM3", 4096, true},
    {"NVIDIA H100 80GB HBM3", 6144, true},  {"NVIDIA H100 80GB HBM3", 8192, true},
    {"NVIDIA H100 80GB HBM3", 16384, true}, {"NVIDIA H100 80GB HBM3", 131072, true},
};

// Whether Auto takes the unbounded overflow route (every row packed in the unbounded layout from the
// cuBLAS gate's pre-activations, nothing recomputed) rather than the dense recomputation, per GPU model
// and token count, where the gate is cuBLAS's and the consumer one of the CTA kernels: the forward end
// to end (bench_end_to_end on the SparseLM-0.5B-shaped checkpoint at 0.5 %, every layer TwELL).
// - H100 80GB HBM3 (h100-unbounded-overflow-route-2026-12-06.json, h100-auto-unbounded-route-2026-12-07.json,
//   two machines): the forward 11-17 % faster at M 256, 6-11 % at M 512, 0-6 % at M 1024 (3 % on the
//   first machine); at M 64 and 128 a tie or 1-7 % slower. That was while the forward still copied
//   the unbounded route's counts on its stream between the layers; once they came off it (8f7533e,
//   h100-forward-counters-2026-12-07.json, three rounds on one fresh machine), the unbounded route won
//   at M 64 too (1.005-1.057x dense against 0.981-0.995x, every pair) and at M 128 (1.052-1.058x
//   against 0.910-0.999x): where the bounded route waits on the host for each layer's counts, the
//   next layer is queued late.
// - H200: not measured; the dense recomputation stays.
constexpr PreferencePoint kOverflowUnboundedMeasured[] = {
    {"NVIDIA H100 80GB HBM3", 64, true},   {"NVIDIA H100 80GB HBM3", 128, true},
    {"NVIDIA H100 80GB HBM3", 256, true},  {"NVIDIA H100 80GB HBM3", 512, true},
    {"NVIDIA H100 80GB HBM3", 1024, true},
};

// The point of `points` that `applies` accepts with the token count nearest `tokens`, or null. Token
// counts compare on a log scale: 4096 is as far from 16384 as 16384 from 65536.
template <typename Point, std::size_t Count, typename Applies>
const Point* nearest_measured(const Point (&points)[Count], int tokens, Applies applies) {
  const Point* nearest = nullptr;
  double nearest_distance = 0;
  for (const Point& point : points) {
    if (!applies(point)) continue;
    const double distance = std::fabs(std::log2(std::max(tokens, 1)) - std::log2(point.tokens));
    if (nearest == nullptr || distance < nearest_distance) {
      nearest = &point;
      nearest_distance = distance;
    }
  }
  return nearest;
}

// The preference measured on `gpu_name` at the token count nearest `tokens`; false where that model
// was never measured.
template <std::size_t Count>
bool measured_preference(const PreferencePoint (&points)[Count], const std::string& gpu_name, int tokens) {
  const PreferencePoint* nearest = nearest_measured(
      points, tokens, [&](const PreferencePoint& point) { return gpu_name == point.gpu_name; });
  return nearest != nullptr && nearest->preferred;
}

// What the tables key on, read once per device: the runner asks for every layer call.
struct DeviceModel {
  std::string name;
  int major = 0, minor = 0;
};

DeviceModel device_model(int device) {
  static std::mutex mutex;
  static std::vector<DeviceModel> models;  // per device; empty name until read
  if (device < 0)
    throw Error(Error::Kind::InvalidInput,
                "TwELL dispatch tables: device " + std::to_string(device) + " does not exist");
  const std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<int>(models.size()) <= device) models.resize(device + 1);
  if (models[device].name.empty()) {
    cudaDeviceProp properties{};
    TWELL_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    models[device] = {properties.name, properties.major, properties.minor};
  }
  return models[device];
}

}  // namespace

FfnBreakEven twell_break_even(const FfnShape& shape, int device) {
  const DeviceModel model = device_model(device);
  const BreakEvenPoint* nearest = nearest_measured(kMeasured, shape.tokens, [&](const BreakEvenPoint& point) {
    return model.name == point.gpu_name && model.major == point.major && model.minor == point.minor &&
           shape.hidden == point.hidden && shape.intermediate == point.intermediate &&
           shape.compression == point.compression && shape.gated == point.gated;
  });
  if (nearest == nullptr) return conservative_break_even("no measurement for this GPU and shape");
  return {nearest->density, true,
          std::string(nearest->gpu_name) + ", D " + std::to_string(nearest->hidden) + ", N " +
              std::to_string(nearest->intermediate) + ", C " + std::to_string(nearest->compression) + ", M " +
              std::to_string(nearest->tokens) + " (" + nearest->source + ")"};
}

FfnPath choose_ffn_path(double measured_density, const FfnShape& shape, int device) {
  return twell::choose_ffn_path(measured_density, twell_break_even(shape, device));
}

int sm90_gate_cluster_size_for(const std::string& gpu_name, int tokens) {
  const GateClusterPoint* nearest =
      nearest_measured(kGateClusterMeasured, tokens,
                       [&](const GateClusterPoint& point) { return gpu_name == point.gpu_name; });
  return nearest == nullptr ? 1 : nearest->cluster_size;
}

int sm90_gate_cluster_size(int device, int tokens) {
  return sm90_gate_cluster_size_for(device_model(device).name, tokens);
}

bool gate_cublas_pack_preferred_for(const std::string& gpu_name, int tokens) {
  return measured_preference(kGateCublasPackMeasured, gpu_name, tokens);
}

bool gate_cublas_pack_preferred(int device, int tokens) {
  return gate_cublas_pack_preferred_for(device_model(device).name, tokens);
}

bool up_down_split_preferred_for(const std::string& gpu_name, int tokens) {
  return measured_preference(kUpDownSplitMeasured, gpu_name, tokens);
}

bool up_down_split_preferred(int device, int tokens) {
  return up_down_split_preferred_for(device_model(device).name, tokens);
}

bool overflow_unbounded_preferred_for(const std::string& gpu_name, int tokens) {
  return measured_preference(kOverflowUnboundedMeasured, gpu_name, tokens);
}

bool overflow_unbounded_preferred(int device, int tokens) {
  return overflow_unbounded_preferred_for(device_model(device).name, tokens);
}

}  // namespace twell::cuda
