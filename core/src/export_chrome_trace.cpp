// SPDX-License-Identifier: GPL-3.0-or-later
// Chrome trace event JSON (ECOSYSTEM.md §1.3): Perfetto drops or misdraws X events that partly
// overlap on one (pid, tid), so the layout below guarantees strict nesting per track.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "twell/report_export.hpp"
#include "twell/version.hpp"

namespace twell {
namespace {

using nlohmann::json;

constexpr int kPid = 1;
constexpr int kLanesPerGroup = 100;  // tid = group * kLanesPerGroup + lane + 1

struct Slice {
  std::uint64_t start = 0, end = 0;
  int level = 0;  ///< 0: a forward, 1: a layer, 2: a record; parents sort before children on ties
  std::string name, category;
  json args;
};

/// A group of slices that belong together on screen: one phase of one path.
struct Group {
  std::string phase, path;
  std::vector<Slice> slices;
};

std::string category_of(const std::string& kind) {
  if (kind == "kernel") return "kernel";
  if (kind == "memcpy") return "gpu_memcpy";
  if (kind == "memset") return "gpu_memset";
  if (kind == "cpu") return "cpu_op";
  return kind;
}

int phase_rank(const std::string& phase) {
  if (phase == "layer_ffn") return 0;
  if (phase == "end_to_end") return 1;
  return 2;
}

int path_rank(const std::string& path) {
  if (path == "dense") return 0;
  if (path == "twell") return 1;
  return 2;
}

std::string phase_title(const std::string& phase) {
  if (phase == "layer_ffn") return "layer FFN";
  if (phase == "end_to_end") return "end to end";
  return phase.empty() ? std::string("unattributed") : phase;
}

json record_args(const KernelRecord& r) {
  json args = {{"op", r.tag.op}, {"layer", r.tag.layer}, {"repetition", r.tag.repetition}};
  if (r.kind == "cpu") return args;
  args["correlation"] = r.correlation_id;
  args["device"] = r.device;
  args["context"] = r.context;
  args["stream"] = r.stream;
  if (r.kind == "kernel") {
    args["grid"] = r.grid;
    args["block"] = r.block;
    args["registers per thread"] = r.registers_per_thread;
    args["shared memory"] = r.static_shared_bytes + r.dynamic_shared_bytes;
  } else {
    args["bytes"] = r.bytes;
  }
  return args;
}

/// Hull of each (repetition, layer) of a group's records: the per-layer slices, and for a whole
/// forward one slice around everything it ran.
void add_parent_slices(const Report& report, Group& group) {
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> layer_hull, forward_hull;
  auto grow = [](auto& hull, int key, const Slice& s) {
    auto [it, fresh] = hull.try_emplace(key, s.start, s.end);
    if (!fresh) it->second = {std::min(it->second.first, s.start), std::max(it->second.second, s.end)};
  };
  for (const Slice& s : group.slices) {
    const int layer = s.args.value("layer", -1);
    const int repetition = s.args.value("repetition", 0);
    if (layer >= 0) grow(layer_hull, layer, s);
    if (group.phase == "end_to_end") grow(forward_hull, repetition, s);
  }
  for (const auto& [layer, hull] : layer_hull) {
    Slice s{hull.first,
            hull.second,
            1,
            "layer " + std::to_string(layer) + " (" + group.path + ")",
            "gpu_user_annotation",
            {{"layer", layer}, {"path", group.path}}};
    for (const auto& entry : report.layers)
      if (entry.index == layer) {
        s.args["density"] = entry.sparsity.density;
        if (const PathTiming* timing = entry.find_path(group.path))
          s.args["median us"] = timing->total.median_us;
        // The dispatch forward's layers each ran one of the two paths: say which.
        if (const auto chosen = report.dispatch_path(entry); chosen && group.path == kDispatchForwardPath) {
          s.name = "layer " + std::to_string(layer) + " (dispatch: " + to_string(*chosen) + ")";
          s.args["ran on"] = to_string(*chosen);
        }
      }
    group.slices.push_back(std::move(s));
  }
  for (const auto& [repetition, hull] : forward_hull)
    group.slices.push_back({hull.first,
                            hull.second,
                            0,
                            "forward (" + group.path + ")",
                            "gpu_user_annotation",
                            {{"path", group.path}, {"repetition", repetition}}});
}

/// Assigns each slice to the first lane where it nests in (or follows) what is open there.
std::vector<std::vector<const Slice*>> lay_out(std::vector<Slice>& slices) {
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::tuple(a.start, b.end, a.level) < std::tuple(b.start, a.end, b.level);
  });
  std::vector<std::vector<const Slice*>> lanes;  // slices per lane, in order
  std::vector<std::vector<const Slice*>> open;   // the chain of open slices per lane
  for (const Slice& s : slices) {
    std::size_t lane = 0;
    for (; lane < lanes.size(); ++lane) {
      auto& stack = open[lane];
      while (!stack.empty() && stack.back()->end <= s.start) stack.pop_back();
      if (stack.empty() || (stack.back()->start <= s.start && s.end <= stack.back()->end)) break;
    }
    if (lane == lanes.size()) {
      lanes.emplace_back();
      open.emplace_back();
    }
    lanes[lane].push_back(&s);
    open[lane].push_back(&s);
  }
  return lanes;
}

/// Relative microseconds with nanosecond resolution.
double relative_us(std::uint64_t ns, std::uint64_t base) {
  return static_cast<double>(ns - base) / 1000.0;
}

}  // namespace

std::string export_chrome_trace(const Report& report) {
  std::uint64_t base = 0;
  if (!report.timeline.empty()) {
    base = report.timeline.front().start_ns;
    for (const auto& r : report.timeline) base = std::min(base, r.start_ns);
  }

  std::map<std::tuple<int, int, std::string, std::string>, Group> groups;
  for (const auto& r : report.timeline) {
    const auto key = std::tuple(phase_rank(r.tag.phase), path_rank(r.tag.path), r.tag.phase, r.tag.path);
    Group& group = groups[key];
    group.phase = r.tag.phase;
    group.path = r.tag.path;
    group.slices.push_back({r.start_ns, r.end_ns, 2, r.name, category_of(r.kind), record_args(r)});
  }

  json events = json::array();
  const std::string process =
      "twellscope: " + (report.device.name.empty() ? report.device.backend : report.device.name) +
      (report.tracer.clock == "cpu" ? " (CPU timings)" : "");
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", 0}, {"args", {{"name", process}}}});
  int group_index = 0;
  for (auto& [key, group] : groups) {
    add_parent_slices(report, group);
    const auto lanes = lay_out(group.slices);
    for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
      const int tid = group_index * kLanesPerGroup + static_cast<int>(lane) + 1;
      std::string title =
          (group.path.empty() ? std::string("no path") : group.path) + ": " + phase_title(group.phase);
      if (lane > 0) title += " (overlap " + std::to_string(lane) + ")";
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", tid}, {"args", {{"name", title}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", kPid},
                        {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
      for (const Slice* s : lanes[lane])
        events.push_back({{"name", s->name},
                          {"cat", s->category},
                          {"ph", "X"},
                          {"pid", kPid},
                          {"tid", tid},
                          {"ts", relative_us(s->start, base)},
                          {"dur", static_cast<double>(s->end - s->start) / 1000.0},
                          {"args", s->args}});
    }
    ++group_index;
  }

  // Per-layer density as a counter, stepped at the start of each layer's first slice.
  std::map<int, std::uint64_t> layer_start;
  for (const auto& r : report.timeline)
    if (r.tag.phase == "layer_ffn" && r.tag.layer >= 0) {
      auto [it, fresh] = layer_start.try_emplace(r.tag.layer, r.start_ns);
      if (!fresh) it->second = std::min(it->second, r.start_ns);
    }
  for (const auto& layer : report.layers) {
    const auto it = layer_start.find(layer.index);
    if (it == layer_start.end()) continue;
    events.push_back({{"name", "FFN activation density"},
                      {"ph", "C"},
                      {"pid", kPid},
                      {"ts", relative_us(it->second, base)},
                      {"args", {{"density", layer.sparsity.density}}}});
  }

  json trace = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"baseTimeNanoseconds", base},
      {"traceName", "twellscope " + report.model.source + " " + report.created_utc},
      {"otherData",
       {{"generator", std::string("twellscope ") + report.tool_version + " (" + report.tool_commit + ")"},
        {"device", report.device.name},
        {"backend", report.device.backend},
        {"tracer", report.tracer.name},
        {"clock", report.tracer.clock},
        {"note", "one timed repetition per layer and path (layer FFN) and per forward (end to end)"}}}};
  return trace.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace twell
