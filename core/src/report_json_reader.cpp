// SPDX-License-Identifier: GPL-3.0-or-later
// JSON -> Report, validating as it goes (see report_io.hpp for the rules).
#include <algorithm>
#include <array>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "base64.hpp"
#include "json_reader.hpp"
#include "twell/error.hpp"
#include "twell/report_io.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell {
namespace {

using json_reader::Node;

TimingStat read_timing(const Node& node) {
  TimingStat stat;
  stat.median_us = node.at("medianUs").real();
  stat.min_us = node.at("minUs").real();
  stat.max_us = node.at("maxUs").real();
  stat.count = node.at("count").integer<std::uint32_t>();
  return stat;
}

DeviceInfo read_device(const Node& node) {
  DeviceInfo device;
  device.backend = node.at("backend").string();
  device.name = node.at("name").string();
  device.compute_capability = node.at("computeCapability").string();
  device.multiprocessor_count = node.at("multiprocessorCount").integer<int>();
  device.memory_bytes = node.at("memoryBytes").integer<std::uint64_t>();
  device.driver_version = node.at("driverVersion").string();
  device.runtime_version = node.at("runtimeVersion").string();
  device.kernel_family = node.at("kernelFamily").string();
  return device;
}

TracerInfo read_tracer(const Node& node) {
  TracerInfo tracer;
  tracer.name = node.at("name").string();
  tracer.clock = node.at("clock").string();
  if (tracer.clock != "gpu" && tracer.clock != "cpu")
    node.at("clock").fail("expected \"gpu\" or \"cpu\", found \"" + tracer.clock + "\"");
  tracer.fallback_reason = node.at("fallbackReason").string();
  tracer.per_kernel = node.at("perKernel").boolean();
  return tracer;
}

ModelSummary read_model(const Node& node) {
  ModelSummary model;
  model.source = node.at("source").string();
  model.parameters = node.at("parameters").integer<std::uint64_t>();
  const Node activation = node.at("activation");
  const Node activation_name = activation.at("name");
  const auto parsed = activation_from_string(activation_name.string());
  if (!parsed)
    activation_name.fail("unknown activation \"" + activation_name.string() + "\" (expected relu or silu)");
  model.activation.activation = *parsed;
  model.activation.reason = activation.at("reason").string();

  const Node c = node.at("config");
  ModelConfig& config = model.config;
  config.model_type = c.at("modelType").string();
  config.hidden_size = c.at("hiddenSize").integer<std::int64_t>();
  config.intermediate_size = c.at("intermediateSize").integer<std::int64_t>();
  config.num_hidden_layers = c.at("numHiddenLayers").integer<std::int64_t>();
  config.num_attention_heads = c.at("numAttentionHeads").integer<std::int64_t>();
  config.num_key_value_heads = c.at("numKeyValueHeads").integer<std::int64_t>();
  config.head_dim = c.at("headDim").integer<std::int64_t>();
  config.rms_norm_eps = c.at("rmsNormEps").real();
  config.rope_theta = c.at("ropeTheta").real();
  if (auto scaling = c.find("ropeScaling")) config.rope_scaling = scaling->string();
  config.vocab_size = c.at("vocabSize").integer<std::int64_t>();
  config.tie_word_embeddings = c.at("tieWordEmbeddings").boolean();
  config.hidden_act = c.at("hiddenAct").string();
  config.dtype = c.at("dtype").string();
  if (config.num_hidden_layers < 0) c.at("numHiddenLayers").fail("must not be negative");
  return model;
}

ProfileConfig read_profile_config(const Node& node) {
  ProfileConfig config;
  config.batch = node.at("batch").integer<std::uint32_t>();
  config.sequence = node.at("sequence").integer<std::uint32_t>();
  config.token_source = node.at("tokenSource").string();
  config.seed = node.at("seed").integer<std::uint64_t>();
  config.paths = node.at("paths").string_array();
  config.compression = node.at("compression").integer<std::uint32_t>();
  config.highest_precision = node.at("highestPrecision").boolean();
  config.warmup = node.at("warmup").integer<std::uint32_t>();
  config.repetitions = node.at("repetitions").integer<std::uint32_t>();
  config.layers = node.at("layers").integer_array<int>();
  config.flush_l2 = node.at("flushL2").boolean();
  config.end_to_end = node.at("endToEnd").boolean();
  const Node map_shape = node.at("mapShape");
  config.map_shape.max_rows = map_shape.at("maxRows").integer<std::uint32_t>();
  config.map_shape.max_cols = map_shape.at("maxCols").integer<std::uint32_t>();
  if (auto break_even = node.find("dispatchBreakEven")) {
    config.dispatch_break_even = break_even->real();
    if (!is_settable_break_even(*config.dispatch_break_even))
      break_even->fail("a break-even density is a fraction in (0, 1)");
  }
  if (auto kernels = node.find("twellKernels")) {
    try {
      config.twell_kernels = parse_twell_kernel_request(kernels->string());
    } catch (const Error& error) {
      kernels->fail(error.what());
    }
  }
  return config;
}

Distribution read_distribution(const Node& node) {
  Distribution d;
  d.mean = node.at("mean").real();
  d.p50 = node.at("p50").real();
  d.p90 = node.at("p90").real();
  d.p99 = node.at("p99").real();
  d.max = node.at("max").real();
  return d;
}

TokenNeuronMap read_map(const Node& node) {
  TokenNeuronMap map;
  map.rows = node.at("rows").integer<std::uint32_t>();
  map.cols = node.at("cols").integer<std::uint32_t>();
  map.tokens = node.at("tokens").integer<std::uint32_t>();
  map.neurons = node.at("neurons").integer<std::uint32_t>();
  const Node encoding = node.at("encoding");
  if (encoding.string() != "base64")
    encoding.fail("unknown encoding \"" + encoding.string() + "\" (expected base64)");
  const Node cells = node.at("cells");
  auto bytes = base64::decode(cells.string());
  if (!bytes) cells.fail("not valid base64");
  const std::uint64_t expected = std::uint64_t(map.rows) * map.cols;
  if (bytes->size() != expected)
    cells.fail("holds " + std::to_string(bytes->size()) + " cells, but rows x cols is " +
               std::to_string(expected));
  map.cells = std::move(*bytes);
  return map;
}

LayerSparsityStats read_sparsity(const Node& node) {
  LayerSparsityStats s;
  s.tokens = node.at("tokens").integer<std::uint64_t>();
  s.neurons = node.at("neurons").integer<std::uint32_t>();
  s.density = node.at("density").real();
  s.nnz_per_token = read_distribution(node.at("nnzPerToken"));
  s.nnz_histogram = node.at("nnzHistogram").integer_array<std::uint64_t>();
  const Node fire_counts = node.at("neuronFireCounts");
  s.neuron_fire_counts = fire_counts.integer_array<std::uint32_t>();
  if (!s.neuron_fire_counts.empty() && s.neuron_fire_counts.size() != s.neurons)
    fire_counts.fail("has " + std::to_string(s.neuron_fire_counts.size()) + " entries for " +
                     std::to_string(s.neurons) + " neurons");
  s.dead_neurons = node.at("deadNeurons").integer<std::uint32_t>();
  s.tile_max = node.at("tileMax").integer<std::uint32_t>();
  s.tile_count_histogram = node.at("tileCountHistogram").integer_array<std::uint64_t>();
  for (const Node& item : node.at("capacity").items()) {
    CapacityCheck check;
    check.compression = item.at("compression").integer<std::uint32_t>();
    check.capacity = item.at("capacity").integer<std::uint32_t>();
    check.overflow_tiles = item.at("overflowTiles").integer<std::uint64_t>();
    check.overflow_rows = item.at("overflowRows").integer<std::uint64_t>();
    s.capacity.push_back(check);
  }
  s.map = read_map(node.at("map"));
  return s;
}

LayerReport read_layer(const Node& node) {
  LayerReport layer;
  layer.index = node.at("index").integer<int>();
  layer.sparsity = read_sparsity(node.at("sparsity"));
  for (const Node& item : node.at("paths").items()) {
    PathTiming path;
    path.path = item.at("path").string();
    path.total = read_timing(item.at("total"));
    for (const Node& op_node : item.at("ops").items())
      path.ops.push_back({op_node.at("op").string(), read_timing(op_node.at("time"))});
    path.overflow_rows = item.at("overflowRows").integer<std::uint64_t>();
    layer.paths.push_back(std::move(path));
  }
  if (auto errors = node.find("twellVsDense")) {
    ErrorMetrics metrics;
    metrics.rel_frobenius = errors->at("relFrobenius").real();
    metrics.max_abs = errors->at("maxAbs").real();
    metrics.cosine = errors->at("cosine").real();
    layer.twell_vs_dense = metrics;
  }
  return layer;
}

TraceTag read_tag(const Node& node) {
  TraceTag tag;
  tag.phase = node.at("phase").string();
  tag.layer = node.at("layer").integer<int>();
  tag.path = node.at("path").string();
  tag.op = node.at("op").string();
  tag.repetition = node.at("repetition").integer<int>();
  tag.warmup = node.at("warmup").boolean();
  return tag;
}

std::array<std::int32_t, 3> read_dim3(const Node& node) {
  const auto values = node.integer_array<std::int32_t>();
  if (values.size() != 3) node.fail("expected 3 integers (x, y, z), found " + std::to_string(values.size()));
  return {values[0], values[1], values[2]};
}

KernelRecord read_record(const Node& node) {
  KernelRecord r;
  r.kind = node.at("kind").string();
  r.name = node.at("name").string();
  r.start_ns = node.at("startNs").integer<std::uint64_t>();
  r.end_ns = node.at("endNs").integer<std::uint64_t>();
  if (r.end_ns < r.start_ns)
    node.at("endNs").fail("ends before it starts (startNs " + std::to_string(r.start_ns) + ")");
  r.device = node.at("device").integer<std::uint32_t>();
  r.context = node.at("context").integer<std::uint32_t>();
  r.stream = node.at("stream").integer<std::uint32_t>();
  r.grid = read_dim3(node.at("grid"));
  r.block = read_dim3(node.at("block"));
  r.registers_per_thread = node.at("registersPerThread").integer<std::int32_t>();
  r.static_shared_bytes = node.at("staticSharedBytes").integer<std::int32_t>();
  r.dynamic_shared_bytes = node.at("dynamicSharedBytes").integer<std::int32_t>();
  r.correlation_id = node.at("correlationId").integer<std::uint64_t>();
  r.bytes = node.at("bytes").integer<std::uint64_t>();
  r.tag = read_tag(node.at("tag"));
  r.attributed = node.at("attributed").boolean();
  return r;
}

/// "MAJOR.MINOR" (a third component is tolerated and ignored).
std::pair<int, int> read_version(const Node& node) {
  const std::string text = node.string();
  static const std::regex pattern(R"(^(\d{1,6})\.(\d{1,6})(\.\d{1,6})?$)");
  std::smatch match;
  if (!std::regex_match(text, match, pattern)) node.fail("\"" + text + "\" is not a MAJOR.MINOR version");
  return {std::stoi(match[1].str()), std::stoi(match[2].str())};
}

std::string describe_list(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size() && i < 12; ++i)
    out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > 12) out += ", ... (" + std::to_string(values.size()) + " in all)";
  return out;
}

/// The layers must be exactly those the configuration selected (every layer when it selected
/// none), in increasing order: a report with a hole in it is damaged, not merely short.
void check_layer_indices(const Report& report, const Node& layers_node, const Node& root) {
  std::vector<int> expected;
  if (report.config.layers.empty()) {
    for (std::int64_t i = 0; i < report.model.config.num_hidden_layers; ++i)
      expected.push_back(static_cast<int>(i));
  } else {
    std::set<int> unique(report.config.layers.begin(), report.config.layers.end());
    expected.assign(unique.begin(), unique.end());
    const auto layer_count = report.model.config.num_hidden_layers;
    for (int layer : expected)
      if (layer < 0 || layer >= layer_count)
        root.at("config").at("layers").fail("selects layer " + std::to_string(layer) +
                                            ", but the model has " + std::to_string(layer_count) + " layers");
  }
  const std::vector<Node> items = layers_node.items();
  for (std::size_t i = 1; i < report.layers.size(); ++i)
    if (report.layers[i].index <= report.layers[i - 1].index)
      items[i].at("index").fail("layer " + std::to_string(report.layers[i].index) + " follows layer " +
                                std::to_string(report.layers[i - 1].index) +
                                " (layers must be listed once each, in increasing order)");
  std::vector<int> missing, unexpected;
  std::vector<int> present;
  for (const auto& layer : report.layers) present.push_back(layer.index);
  std::set_difference(expected.begin(), expected.end(), present.begin(), present.end(),
                      std::back_inserter(missing));
  std::set_difference(present.begin(), present.end(), expected.begin(), expected.end(),
                      std::back_inserter(unexpected));
  if (!missing.empty())
    layers_node.fail(
        "layer" + std::string(missing.size() > 1 ? "s " : " ") + describe_list(missing) +
        (missing.size() > 1 ? " are" : " is") + " missing (the report covers " +
        (report.config.layers.empty() ? "every layer of the model" : "the layers config.layers selects") +
        ": " + describe_list(expected) + ")");
  if (!unexpected.empty())
    layers_node.fail("layer" + std::string(unexpected.size() > 1 ? "s " : " ") + describe_list(unexpected) +
                     " not selected by the configuration (expected " + describe_list(expected) + ")");
}

}  // namespace

Report report_from_json(const nlohmann::json& json, const std::string& source) {
  const Node root(json, "$", source);
  if (!json.is_object()) root.fail("a report is a JSON object, found " + std::string(json.type_name()));
  const auto schema = root.find("schema");
  if (!schema) root.fail("not a twellscope report (no \"schema\" field)");
  if (schema->string() != kReportSchemaId)
    schema->fail("not a twellscope report (schema \"" + schema->string() + "\", expected \"" +
                 kReportSchemaId + "\")");
  const auto [major, minor] = read_version(root.at("schemaVersion"));
  if (major > kReportSchemaMajor)
    throw Error(Error::Kind::Unsupported,
                source + ": report format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is newer than this twellscope reads (" + std::to_string(kReportSchemaMajor) +
                    ".x); open it with a newer twellscope");
  if (major < 1) root.at("schemaVersion").fail("version " + std::to_string(major) + " was never released");

  Report report;
  report.schema_major = major;
  report.schema_minor = minor;
  const Node generator = root.at("generator");
  report.tool_version = generator.at("version").string();
  report.tool_commit = generator.at("gitCommit").string();
  report.created_utc = root.at("createdUtc").string();
  report.host = root.at("host").string();
  report.device = read_device(root.at("device"));
  report.tracer = read_tracer(root.at("tracer"));
  report.model = read_model(root.at("model"));
  report.config = read_profile_config(root.at("config"));
  const Node layers = root.at("layers");
  for (const Node& item : layers.items()) report.layers.push_back(read_layer(item));
  check_layer_indices(report, layers, root);
  for (const Node& item : root.at("endToEnd").items()) {
    EndToEndPath entry{item.at("path").string(), read_timing(item.at("forward")),
                       item.at("tokensPerMs").real()};
    if (auto occupied = item.find("occupied")) entry.occupied = read_timing(*occupied);
    report.end_to_end.push_back(std::move(entry));
  }
  for (const Node& item : root.at("kernels").items()) {
    KernelStat stat;
    stat.name = item.at("name").string();
    stat.layer = item.at("layer").integer<int>();
    stat.path = item.at("path").string();
    stat.op = item.at("op").string();
    stat.time = read_timing(item.at("time"));
    report.kernels.push_back(std::move(stat));
  }
  if (auto variants = root.find("kernelVariants")) {
    for (const Node& item : variants->items()) {
      KernelVariant variant;
      variant.name = item.at("name").string();
      variant.library = item.at("library").boolean();
      variant.path = item.at("path").string();
      variant.op = item.at("op").string();
      variant.architectures = item.at("architectures").string();
      variant.description = item.at("description").string();
      report.kernel_variants.push_back(std::move(variant));
    }
  }
  for (const Node& item : root.at("timeline").items()) report.timeline.push_back(read_record(item));
  report.warnings = root.at("warnings").string_array();
  if (auto dispatch = root.find("dispatch")) {
    FfnBreakEven break_even;
    break_even.density = dispatch->at("breakEvenDensity").real();
    if (!(break_even.density >= 0.0 && break_even.density <= 1.0))
      dispatch->at("breakEvenDensity").fail("a density is a fraction in [0, 1]");
    break_even.measured = dispatch->at("measured").boolean();
    break_even.basis = dispatch->at("basis").string();
    report.dispatch_break_even = std::move(break_even);
  }
  return report;
}

namespace {
// nlohmann's what() starts with a "[json.exception.parse_error.101] " tag, which helps nobody.
std::string without_nlohmann_tag(std::string detail) {
  if (const auto tag_end = detail.find("] ");
      detail.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos)
    detail.erase(0, tag_end + 2);
  return detail;
}
}  // namespace

Report parse_report(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw Error(Error::Kind::InvalidInput, source + ": empty file, not a report");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann counts bytes from 1; an error at or past the last byte means the text stopped early.
    if (e.byte >= text.size())
      throw Error(Error::Kind::InvalidInput, source + ": truncated: the JSON ends after " +
                                                 std::to_string(text.size()) +
                                                 " bytes, in the middle of a value");
    const std::string detail = without_nlohmann_tag(e.what());
    throw Error(Error::Kind::InvalidInput,
                source + ": not valid JSON at byte " + std::to_string(e.byte) + ": " + detail);
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error but a value nlohmann cannot hold, e.g. a number past the range of double.
    const std::string detail = without_nlohmann_tag(e.what());
    throw Error(Error::Kind::InvalidInput, source + ": not a valid report: " + detail);
  }
  return report_from_json(json, source);
}

}  // namespace twell
