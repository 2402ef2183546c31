// SPDX-License-Identifier: GPL-3.0-or-later
// Report -> JSON. The reader is report_json_reader.cpp; the two must agree with
// resources/schema/report.schema.json.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base64.hpp"
#include "twell/atomic_file.hpp"
#include "twell/error.hpp"
#include "twell/report_io.hpp"

namespace twell {
namespace {

using nlohmann::json;

/// JSON has no NaN or infinity; a measurement that produced one is written as null.
json real(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json timing_json(const TimingStat& stat) {
  return {{"medianUs", real(stat.median_us)},
          {"minUs", real(stat.min_us)},
          {"maxUs", real(stat.max_us)},
          {"count", stat.count}};
}

json device_json(const DeviceInfo& device) {
  return {{"backend", device.backend},
          {"name", device.name},
          {"computeCapability", device.compute_capability},
          {"multiprocessorCount", device.multiprocessor_count},
          {"memoryBytes", device.memory_bytes},
          {"driverVersion", device.driver_version},
          {"runtimeVersion", device.runtime_version},
          {"kernelFamily", device.kernel_family}};
}

json tracer_json(const TracerInfo& tracer) {
  return {{"name", tracer.name},
          {"clock", tracer.clock},
          {"fallbackReason", tracer.fallback_reason},
          {"perKernel", tracer.per_kernel}};
}

json model_json(const ModelSummary& model) {
  const ModelConfig& c = model.config;
  json config = {{"modelType", c.model_type},
                 {"hiddenSize", c.hidden_size},
                 {"intermediateSize", c.intermediate_size},
                 {"numHiddenLayers", c.num_hidden_layers},
                 {"numAttentionHeads", c.num_attention_heads},
                 {"numKeyValueHeads", c.num_key_value_heads},
                 {"headDim", c.head_dim},
                 {"rmsNormEps", real(c.rms_norm_eps)},
                 {"ropeTheta", real(c.rope_theta)},
                 {"ropeScaling", c.rope_scaling ? json(*c.rope_scaling) : json(nullptr)},
                 {"vocabSize", c.vocab_size},
                 {"tieWordEmbeddings", c.tie_word_embeddings},
                 {"hiddenAct", c.hidden_act},
                 {"dtype", c.dtype}};
  return {
      {"source", model.source},
      {"parameters", model.parameters},
      {"activation", {{"name", to_string(model.activation.activation)}, {"reason", model.activation.reason}}},
      {"config", std::move(config)}};
}

json profile_config_json(const ProfileConfig& config) {
  json out = {{"batch", config.batch},
              {"sequence", config.sequence},
              {"tokenSource", config.token_source},
              {"seed", config.seed},
              {"paths", config.paths},
              {"compression", config.compression},
              {"highestPrecision", config.highest_precision},
              {"warmup", config.warmup},
              {"repetitions", config.repetitions},
              {"layers", config.layers},
              {"flushL2", config.flush_l2},
              {"endToEnd", config.end_to_end},
              {"mapShape", {{"maxRows", config.map_shape.max_rows}, {"maxCols", config.map_shape.max_cols}}}};
  if (config.dispatch_break_even) out["dispatchBreakEven"] = real(*config.dispatch_break_even);
  if (!config.twell_kernels.is_auto()) out["twellKernels"] = to_string(config.twell_kernels);
  return out;
}

json distribution_json(const Distribution& d) {
  return {{"mean", real(d.mean)},
          {"p50", real(d.p50)},
          {"p90", real(d.p90)},
          {"p99", real(d.p99)},
          {"max", real(d.max)}};
}

json sparsity_json(const LayerSparsityStats& s) {
  json capacity = json::array();
  for (const auto& check : s.capacity)
    capacity.push_back({{"compression", check.compression},
                        {"capacity", check.capacity},
                        {"overflowTiles", check.overflow_tiles},
                        {"overflowRows", check.overflow_rows}});
  const TokenNeuronMap& map = s.map;
  return {{"tokens", s.tokens},
          {"neurons", s.neurons},
          {"density", real(s.density)},
          {"nnzPerToken", distribution_json(s.nnz_per_token)},
          {"nnzHistogram", s.nnz_histogram},
          {"neuronFireCounts", s.neuron_fire_counts},
          {"deadNeurons", s.dead_neurons},
          {"tileMax", s.tile_max},
          {"tileCountHistogram", s.tile_count_histogram},
          {"capacity", std::move(capacity)},
          {"map",
           {{"rows", map.rows},
            {"cols", map.cols},
            {"tokens", map.tokens},
            {"neurons", map.neurons},
            {"encoding", "base64"},
            {"cells", base64::encode(map.cells.data(), map.cells.size())}}}};
}

json layer_json(const LayerReport& layer) {
  json paths = json::array();
  for (const auto& path : layer.paths) {
    json ops = json::array();
    for (const auto& op : path.ops) ops.push_back({{"op", op.op}, {"time", timing_json(op.time)}});
    paths.push_back({{"path", path.path},
                     {"total", timing_json(path.total)},
                     {"ops", std::move(ops)},
                     {"overflowRows", path.overflow_rows}});
  }
  json out = {
      {"index", layer.index}, {"sparsity", sparsity_json(layer.sparsity)}, {"paths", std::move(paths)}};
  if (layer.twell_vs_dense) {
    const ErrorMetrics& e = *layer.twell_vs_dense;
    out["twellVsDense"] = {
        {"relFrobenius", real(e.rel_frobenius)}, {"maxAbs", real(e.max_abs)}, {"cosine", real(e.cosine)}};
  }
  return out;
}

json tag_json(const TraceTag& tag) {
  return {{"phase", tag.phase}, {"layer", tag.layer},           {"path", tag.path},
          {"op", tag.op},       {"repetition", tag.repetition}, {"warmup", tag.warmup}};
}

json record_json(const KernelRecord& r) {
  return {{"kind", r.kind},
          {"name", r.name},
          {"startNs", r.start_ns},
          {"endNs", r.end_ns},
          {"device", r.device},
          {"context", r.context},
          {"stream", r.stream},
          {"grid", r.grid},
          {"block", r.block},
          {"registersPerThread", r.registers_per_thread},
          {"staticSharedBytes", r.static_shared_bytes},
          {"dynamicSharedBytes", r.dynamic_shared_bytes},
          {"correlationId", r.correlation_id},
          {"bytes", r.bytes},
          {"tag", tag_json(r.tag)},
          {"attributed", r.attributed}};
}

}  // namespace

json report_to_json(const Report& report) {
  json layers = json::array();
  for (const auto& layer : report.layers) layers.push_back(layer_json(layer));
  json end_to_end = json::array();
  for (const auto& e : report.end_to_end) {
    json entry = {
        {"path", e.path}, {"forward", timing_json(e.forward)}, {"tokensPerMs", real(e.tokens_per_ms)}};
    if (e.occupied) entry["occupied"] = timing_json(*e.occupied);
    end_to_end.push_back(std::move(entry));
  }
  json kernels = json::array();
  for (const auto& k : report.kernels)
    kernels.push_back({{"name", k.name},
                       {"layer", k.layer},
                       {"path", k.path},
                       {"op", k.op},
                       {"time", timing_json(k.time)}});
  json variants = json::array();
  for (const auto& v : report.kernel_variants)
    variants.push_back({{"name", v.name},
                        {"library", v.library},
                        {"path", v.path},
                        {"op", v.op},
                        {"architectures", v.architectures},
                        {"description", v.description}});
  json timeline = json::array();
  for (const auto& record : report.timeline) timeline.push_back(record_json(record));

  json out = {
      {"schema", kReportSchemaId},
      {"schemaVersion", std::to_string(kReportSchemaMajor) + "." + std::to_string(kReportSchemaMinor)},
      {"generator",
       {{"name", "twellscope"}, {"version", report.tool_version}, {"gitCommit", report.tool_commit}}},
      {"createdUtc", report.created_utc},
      {"host", report.host},
      {"device", device_json(report.device)},
      {"tracer", tracer_json(report.tracer)},
      {"model", model_json(report.model)},
      {"config", profile_config_json(report.config)},
      {"layers", std::move(layers)},
      {"endToEnd", std::move(end_to_end)},
      {"kernels", std::move(kernels)},
      {"kernelVariants", std::move(variants)},
      {"timeline", std::move(timeline)},
      {"warnings", report.warnings}};
  if (report.dispatch_break_even) {
    const FfnBreakEven& b = *report.dispatch_break_even;
    out["dispatch"] = {{"breakEvenDensity", real(b.density)}, {"measured", b.measured}, {"basis", b.basis}};
  }
  return out;
}

std::string report_to_json_text(const Report& report) {
  std::string text = report_to_json(report).dump(-1, ' ', false, json::error_handler_t::replace);
  text += '\n';
  return text;
}

void save_report(const Report& report, const std::filesystem::path& path) {
  write_file_atomically(path, report_to_json_text(report));
}

Report load_report(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Error::Kind::Io, "cannot open report " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(Error::Kind::Io, "cannot read report " + path.string());
  return parse_report(buffer.str(), path.string());
}

}  // namespace twell
