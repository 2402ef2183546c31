// SPDX-License-Identifier: GPL-3.0-or-later
// The profiling Session against a scripted backend and tracer: what it runs, how it times, what
// the report says, progress and cancellation.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <regex>

#include "fake_backend.hpp"
#include "report_fixture.hpp"
#include "twell/error.hpp"
#include "twell/report_io.hpp"
#include "twell/session.hpp"
#include "twell/version.hpp"

using namespace twell::test::fake;
using twell::FfnPath;

TEST(Session, ReportsEveryLayerWithTheScriptedTimings) {
  SessionFixture f;
  const twell::Report report = f.run();
  ASSERT_EQ(report.layers.size(), 3u);
  for (int l = 0; l < kLayers; ++l) {
    const auto& layer = report.layers[l];
    EXPECT_EQ(layer.index, l);
    ASSERT_EQ(layer.paths.size(), 2u);
    EXPECT_EQ(layer.paths[0].path, "dense");
    EXPECT_DOUBLE_EQ(layer.paths[0].total.median_us, 4.0);
    EXPECT_EQ(layer.paths[0].total.count, 3u);
    EXPECT_DOUBLE_EQ(layer.paths[1].total.median_us, l == 2 ? 11.0 : 2.0);
    EXPECT_EQ(layer.paths[1].overflow_rows, 7u);
    ASSERT_EQ(layer.paths[0].ops.size(), 2u);
    EXPECT_EQ(layer.paths[0].ops[0].op, "gate_up");
    EXPECT_DOUBLE_EQ(layer.paths[0].ops[0].time.median_us, 3.0);
    ASSERT_TRUE(layer.twell_vs_dense);
    EXPECT_DOUBLE_EQ(layer.twell_vs_dense->rel_frobenius, 1e-3);
    EXPECT_EQ(layer.sparsity.tokens, 16u);
    EXPECT_EQ(layer.sparsity.neurons, kNeurons);
  }
  EXPECT_DOUBLE_EQ(*report.layers[0].speedup(), 2.0);
  EXPECT_EQ(f.backend.compares, 3);

  bool found_kernel = false;
  for (const auto& k : report.kernels)
    if (k.name == "nvjet_gemm<bf16, 128>" && k.layer == 1) {
      found_kernel = true;
      EXPECT_EQ(k.path, "dense");
      EXPECT_EQ(k.op, "gate_up");
      EXPECT_DOUBLE_EQ(k.time.median_us, 3.0);
    }
  EXPECT_TRUE(found_kernel);

  // A forward: embedding 1 µs + per layer attention 0.5 + FFN; 16 tokens.
  ASSERT_EQ(report.end_to_end.size(), 2u);
  EXPECT_EQ(report.end_to_end[0].path, "dense");
  EXPECT_DOUBLE_EQ(report.end_to_end[0].forward.median_us, 1.0 + 3 * 4.5);
  EXPECT_DOUBLE_EQ(report.end_to_end[0].tokens_per_ms, 16.0 / (14.5 / 1000.0));
  EXPECT_DOUBLE_EQ(report.end_to_end[1].forward.median_us, 1.0 + 2 * 2.5 + 11.5);
  EXPECT_EQ(report.end_to_end[0].forward.count, 3u);
}

TEST(Session, ReportDescribesTheRun) {
  SessionFixture f;
  const twell::Report report = f.run();
  EXPECT_EQ(report.tool_version, twell::version());
  EXPECT_EQ(report.tool_commit, twell::git_commit());
  EXPECT_TRUE(std::regex_match(report.created_utc, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_FALSE(report.host.empty());
  EXPECT_EQ(report.device.name, "Fake GPU");
  EXPECT_EQ(report.tracer.name, "scripted");
  EXPECT_EQ(report.model, fake_model());
  EXPECT_EQ(report.config.batch, 2u);
  EXPECT_EQ(report.config.sequence, 8u);
  EXPECT_EQ(report.config.token_source, f.tokens.source);
}

TEST(Session, TimelineHoldsTheFirstTimedRepetitionOnly) {
  SessionFixture f;
  const twell::Report report = f.run();
  ASSERT_FALSE(report.timeline.empty());
  std::size_t layer_records = 0, forward_records = 0;
  for (std::size_t i = 0; i < report.timeline.size(); ++i) {
    const auto& r = report.timeline[i];
    EXPECT_FALSE(r.tag.warmup);
    EXPECT_EQ(r.tag.repetition, 0);
    EXPECT_TRUE(r.attributed);
    if (i > 0) {
      EXPECT_LE(report.timeline[i - 1].start_ns, r.start_ns);
    }
    if (r.tag.phase == "layer_ffn") {
      ++layer_records;
    } else if (r.tag.phase == "end_to_end") {
      ++forward_records;
    } else {
      ADD_FAILURE() << "unexpected phase " << r.tag.phase;
    }
  }
  EXPECT_EQ(layer_records, 3u * 4u);                // 3 layers x (2 dense + 2 TwELL kernels)
  EXPECT_EQ(forward_records, 2u * (1u + 3u * 3u));  // 2 paths x (embedding + 3 x (attention + 2 FFN))
}

TEST(Session, WarmupsRunButStayOutOfTheStatistics) {
  SessionFixture f;
  f.config.warmup = 4;
  const twell::Report report = f.run();
  EXPECT_EQ((f.backend.layer_runs[{1, "twell"}]), 4 + 3);
  EXPECT_DOUBLE_EQ(report.layers[1].paths[0].total.max_us, 4.0);
  EXPECT_EQ(f.backend.forwards, 1 + 2 * (4 + 3));
}

TEST(Session, FlushesTheCacheBeforeEachTimedRepetitionWhenAsked) {
  SessionFixture flushing;
  flushing.run();
  EXPECT_EQ(flushing.backend.flushes, 3 * 2 * 3 + 2 * 3);
  SessionFixture warm;
  warm.config.flush_l2 = false;
  warm.run();
  EXPECT_EQ(warm.backend.flushes, 0);
}

TEST(Session, ProfilesOnlyTheSelectedLayers) {
  SessionFixture f;
  f.config.layers = {2, 0, 2};
  const twell::Report report = f.run();
  ASSERT_EQ(report.layers.size(), 2u);
  EXPECT_EQ(report.layers[0].index, 0);
  EXPECT_EQ(report.layers[1].index, 2);
  EXPECT_EQ(report.config.layers, (std::vector<int>{0, 2}));
  EXPECT_EQ((f.backend.layer_runs.count({1, "dense"})), 0u);
  for (const auto& k : report.kernels) EXPECT_NE(k.layer, 1);
}

TEST(Session, OnePathOnlyTimesItWithoutComparing) {
  SessionFixture f;
  f.config.paths = {"twell"};
  f.config.end_to_end = false;
  const twell::Report report = f.run();
  EXPECT_EQ(f.backend.compares, 0);
  EXPECT_TRUE(report.end_to_end.empty());
  for (const auto& layer : report.layers) {
    ASSERT_EQ(layer.paths.size(), 1u);
    EXPECT_EQ(layer.paths[0].path, "twell");
    EXPECT_FALSE(layer.twell_vs_dense);
    EXPECT_FALSE(layer.speedup());
  }
  EXPECT_EQ(f.backend.forwards, 1);
}

TEST(Session, WarnsAboutOverflowAndLayersBelowBreakEven) {
  SessionFixture f;
  const twell::Report report = f.run();
  ASSERT_EQ(report.warnings.size(), 2u) << ::testing::PrintToString(report.warnings);
  EXPECT_NE(report.warnings[0].find("overflows at C=8"), std::string::npos) << report.warnings[0];
  EXPECT_NE(report.warnings[0].find("in layer 1: 3 token rows"), std::string::npos) << report.warnings[0];
  EXPECT_NE(report.warnings[0].find("no layer overflows at C=4"), std::string::npos);
  EXPECT_NE(report.warnings[1].find("slower than dense (below break-even) in 1 of 3 layers: layer 2"),
            std::string::npos)
      << report.warnings[1];
  EXPECT_EQ(report.layers[1].sparsity.capacity[0].overflow_rows, 3u);

  SessionFixture at_c4;
  at_c4.config.compression = 4;
  const twell::Report c4 = at_c4.run();
  for (const auto& warning : c4.warnings) EXPECT_EQ(warning.find("overflows"), std::string::npos) << warning;
}

TEST(Session, RecordsTheDevicesBreakEvenAndWhichLayersTheDispatchRunsDense) {
  SessionFixture without;
  const twell::Report plain = without.run();
  EXPECT_FALSE(plain.dispatch_break_even);
  EXPECT_TRUE(plain.dispatched_layers(FfnPath::Dense).empty());
  EXPECT_FALSE(plain.dispatch_path(plain.layers[0]));

  // Layers 0 and 2 fire at 1/16 = 6.25 %, layer 1 at 623 / 8192 = 7.6 % (its crowded first tile).
  SessionFixture f;
  f.backend.break_even = twell::FfnBreakEven{0.07, true, "Fake GPU, D 16, N 512 (scripted)"};
  const twell::Report report = f.run();
  ASSERT_TRUE(report.dispatch_break_even);
  EXPECT_EQ(*report.dispatch_break_even, *f.backend.break_even);
  EXPECT_EQ(f.backend.break_even_tokens, f.tokens.count());
  EXPECT_EQ(report.dispatched_layers(FfnPath::Twell), (std::vector<int>{0, 2}));
  EXPECT_EQ(report.dispatched_layers(FfnPath::Dense), (std::vector<int>{1}));
  EXPECT_EQ(report.dispatch_path(report.layers[1]), FfnPath::Dense);
  // The scripted timings: TwELL faster in layers 0 and 1, slower in layer 2. The dispatch's
  // threshold disagrees with them in layer 1 (sent dense) and layer 2 (sent to TwELL): both said.
  ASSERT_EQ(report.warnings.size(), 4u) << ::testing::PrintToString(report.warnings);
  EXPECT_NE(report.warnings[2].find("the per-layer dispatch runs 1 of 3 layers dense (layer 1)"),
            std::string::npos)
      << report.warnings[2];
  EXPECT_NE(report.warnings[2].find("7.00%, Fake GPU, D 16, N 512 (scripted)"), std::string::npos)
      << report.warnings[2];
  EXPECT_NE(report.warnings[2].find("TwELL measured faster in layer 1 in this run"), std::string::npos)
      << report.warnings[2];
  EXPECT_NE(report.warnings[3].find("runs layer 2 on TwELL, below the break-even of 7.00%"),
            std::string::npos)
      << report.warnings[3];
  EXPECT_NE(report.warnings[3].find("TwELL measured slower than dense there"), std::string::npos)
      << report.warnings[3];

  // Past every layer's density, the dispatch runs all of them on TwELL: no layer dense, only the
  // one whose timing disagrees is named.
  SessionFixture generous;
  generous.backend.break_even = twell::FfnBreakEven{0.5, false, "conservative default (test)"};
  const twell::Report all_twell = generous.run();
  EXPECT_EQ(all_twell.dispatched_layers(FfnPath::Twell).size(), 3u);
  ASSERT_EQ(all_twell.warnings.size(), 3u) << ::testing::PrintToString(all_twell.warnings);
  EXPECT_NE(all_twell.warnings[2].find("runs layer 2 on TwELL"), std::string::npos) << all_twell.warnings[2];

  // Only layers 0 and 1 profiled, both faster on TwELL, both below the threshold: nothing to say.
  SessionFixture agreeing;
  agreeing.backend.break_even = twell::FfnBreakEven{0.5, false, "conservative default (test)"};
  agreeing.config.layers = {0, 1};
  const twell::Report agreed = agreeing.run();
  for (const auto& warning : agreed.warnings)
    EXPECT_EQ(warning.find("per-layer dispatch"), std::string::npos) << warning;
}

TEST(Session, RunsAForwardThatFollowsTheDispatchLayerByLayer) {
  // Layers 0 and 2 below the break-even (TwELL), layer 1 past it (dense).
  SessionFixture f;
  f.backend.break_even = twell::FfnBreakEven{0.07, true, "Fake GPU (scripted)"};
  const twell::Report report = f.run();
  ASSERT_EQ(report.end_to_end.size(), 3u);
  EXPECT_EQ(report.end_to_end[2].path, twell::kDispatchForwardPath);
  // Embedding 1 µs; layers 0 and 2 on TwELL (0.5 + 2, 0.5 + 11), layer 1 dense (0.5 + 4).
  EXPECT_DOUBLE_EQ(report.end_to_end[2].forward.median_us, 1.0 + 2.5 + 4.5 + 11.5);
  EXPECT_EQ(report.end_to_end[2].forward.count, 3u);
  ASSERT_TRUE(report.dispatch_end_to_end_speedup());
  EXPECT_DOUBLE_EQ(*report.dispatch_end_to_end_speedup(), 14.5 / 19.5);
  // The capture and the dense and TwELL forwards leave the paths to ffn_path; the dispatch forward
  // names one per layer, the same choice the report states.
  const std::vector<FfnPath> chosen{FfnPath::Twell, FfnPath::Dense, FfnPath::Twell};
  int dispatch_forwards = 0;
  for (const auto& paths : f.backend.forward_layer_paths) {
    if (paths.empty()) continue;
    EXPECT_EQ(paths, chosen);
    ++dispatch_forwards;
  }
  EXPECT_EQ(dispatch_forwards, 2 + 3);  // warm-ups and timed repetitions
  for (int l = 0; l < kLayers; ++l) EXPECT_EQ(report.dispatch_path(report.layers[l]), chosen[l]);
  // The timeline keeps the dispatch forward's first timed repetition, every op under its name.
  bool dense_ffn_in_dispatch = false;
  for (const auto& record : report.timeline)
    if (record.tag.phase == "end_to_end" && record.tag.path == twell::kDispatchForwardPath &&
        record.tag.layer == 1 && record.tag.op == "gate_up")
      dense_ffn_in_dispatch = true;
  EXPECT_TRUE(dense_ffn_in_dispatch);
  const twell::Report reread = twell::parse_report(twell::report_to_json_text(report), "dispatch");
  EXPECT_EQ(reread.end_to_end, report.end_to_end);
}

TEST(Session, ABreakEvenSetForTheRunReplacesTheDevicesAndSaysSo) {
  // Without a break-even of the backend's own (the CPU backend's case), a set one still dispatches.
  SessionFixture without_device;
  without_device.config.dispatch_break_even = 0.07;
  const twell::Report set_only = without_device.run();
  ASSERT_TRUE(set_only.dispatch_break_even);
  EXPECT_EQ(*set_only.dispatch_break_even, (twell::FfnBreakEven{0.07, false, "set for this run"}));
  ASSERT_EQ(set_only.end_to_end.size(), 3u);
  EXPECT_EQ(set_only.dispatched_layers(FfnPath::Dense), (std::vector<int>{1}));
  EXPECT_EQ(set_only.config.dispatch_break_even, 0.07);

  // Beside the device's, which the basis still names.
  SessionFixture beside_device;
  beside_device.backend.break_even = twell::FfnBreakEven{0.03, true, "Fake GPU (scripted)"};
  beside_device.config.dispatch_break_even = 0.5;
  const twell::Report replaced = beside_device.run();
  ASSERT_TRUE(replaced.dispatch_break_even);
  EXPECT_DOUBLE_EQ(replaced.dispatch_break_even->density, 0.5);
  EXPECT_EQ(replaced.dispatch_break_even->basis,
            "set for this run (the device's own: 3.00%, Fake GPU (scripted))");
  EXPECT_EQ(replaced.dispatched_layers(FfnPath::Twell).size(), 3u);
  for (const auto& paths : beside_device.backend.forward_layer_paths)
    if (!paths.empty()) {
      EXPECT_EQ(paths, std::vector<FfnPath>(3, FfnPath::Twell));
    }
}

TEST(ReportWarnings, WhereTimingsDisagreeWithTheDispatchTheyNameThisModelsOwnCrossing) {
  // TwELL / dense time 0.70, 0.85 and 1.00 at 0.9, 1.1 and 1.3 %: the fitted line crosses at 1.3 %.
  twell::Report report = twell::test::make_synthetic_report();
  const double densities[] = {0.009, 0.011, 0.013}, ratios[] = {0.70, 0.85, 1.00};
  for (std::size_t i = 0; i < 3; ++i) {
    report.layers[i].sparsity.density = densities[i];
    for (auto& path : report.layers[i].paths)
      path.total.median_us = path.path == "dense" ? 100.0 : 100.0 * ratios[i];
  }
  report.dispatch_break_even = twell::FfnBreakEven{0.0105, true, "scripted"};
  std::vector<std::string> warnings = twell::derive_report_warnings(report);
  const auto dispatch = std::find_if(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("per-layer dispatch runs 2 of 3 layers dense (layers 1, 2)") != std::string::npos;
  });
  ASSERT_NE(dispatch, warnings.end()) << ::testing::PrintToString(warnings);
  EXPECT_NE(dispatch->find("TwELL measured faster in layer 1 in this run"), std::string::npos) << *dispatch;
  EXPECT_NE(dispatch->find("cross at about 1.30% (a fit over 3 layers)"), std::string::npos) << *dispatch;

  // Timings that agree with the threshold name no crossing.
  report.dispatch_break_even = twell::FfnBreakEven{0.012, true, "scripted"};
  warnings = twell::derive_report_warnings(report);
  for (const auto& warning : warnings)
    EXPECT_EQ(warning.find("cross at about"), std::string::npos) << warning;

  // Nor does a fit in which TwELL gets relatively cheaper with density.
  report.dispatch_break_even = twell::FfnBreakEven{0.0105, true, "scripted"};
  for (std::size_t i = 0; i < 3; ++i)
    for (auto& path : report.layers[i].paths)
      if (path.path == "twell") path.total.median_us = 100.0 * ratios[2 - i];
  warnings = twell::derive_report_warnings(report);
  for (const auto& warning : warnings)
    EXPECT_EQ(warning.find("cross at about"), std::string::npos) << warning;
}

TEST(Session, RunsNoDispatchForwardWithoutABreakEvenOrBothPaths) {
  SessionFixture without;
  EXPECT_EQ(without.run().end_to_end.size(), 2u);
  for (const auto& paths : without.backend.forward_layer_paths) EXPECT_TRUE(paths.empty());

  SessionFixture dense_only;
  dense_only.backend.break_even = twell::FfnBreakEven{0.07, true, "Fake GPU (scripted)"};
  dense_only.config.paths = {"dense"};
  const twell::Report report = dense_only.run();
  ASSERT_EQ(report.end_to_end.size(), 1u);
  EXPECT_FALSE(report.dispatch_end_to_end_speedup());

  SessionFixture no_forwards;
  no_forwards.backend.break_even = twell::FfnBreakEven{0.07, true, "Fake GPU (scripted)"};
  no_forwards.config.end_to_end = false;
  EXPECT_TRUE(no_forwards.run().end_to_end.empty());
  EXPECT_EQ(no_forwards.backend.forwards, 1);  // the capture only
}

TEST(Session, SaysWhenTimingsAreCpuTimingsOrCameFromAFallbackTracer) {
  SessionFixture cpu;
  cpu.backend.device_info = {"cpu", "Some CPU", "", 2, 0, "", "", "cpu-reference"};
  const twell::Report cpu_report = cpu.run();
  EXPECT_NE(cpu_report.warnings.at(0).find("timings are CPU timings"), std::string::npos);

  SessionFixture fallback(ScriptedTracer::Mode::Region,
                          "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (under Nsight)");
  const twell::Report report = fallback.run();
  EXPECT_FALSE(report.tracer.per_kernel);
  EXPECT_EQ(report.tracer.fallback_reason, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (under Nsight)");
  EXPECT_NE(report.warnings.at(0).find("instead of CUPTI: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS"),
            std::string::npos);
  EXPECT_NE(report.warnings.at(0).find("without a per-kernel breakdown"), std::string::npos);
  // Region records still time each op.
  EXPECT_GT(report.layers[0].paths[0].total.median_us, 0.0);
}

TEST(Session, ForwardsSayHowMuchOfTheirTimeTheDeviceWasBusy) {
  // Back to back, the device never waits: occupied time is the forward's.
  SessionFixture packed;
  const twell::Report kernel_bound = packed.run();
  for (const auto& forward : kernel_bound.end_to_end) {
    ASSERT_TRUE(forward.occupied) << forward.path;
    EXPECT_EQ(forward.occupied->count, 3u);
    EXPECT_DOUBLE_EQ(forward.occupied->median_us, forward.forward.median_us) << forward.path;
  }
  for (const auto& warning : kernel_bound.warnings)
    EXPECT_EQ(warning.find("busy"), std::string::npos) << warning;

  // 2 us between launches (a small model's launch overhead): the dense forward's 14.5 us of kernels
  // sit in a longer span, and the report says so.
  SessionFixture gaps;
  gaps.tracer.set_gap_ns(2'000);
  const twell::Report launch_bound = gaps.run();
  const twell::EndToEndPath& dense = launch_bound.end_to_end.at(0);
  ASSERT_TRUE(dense.occupied);
  EXPECT_DOUBLE_EQ(dense.occupied->median_us, 1.0 + 3 * 4.5);
  ASSERT_TRUE(dense.occupied_fraction());
  EXPECT_LT(*dense.occupied_fraction(), 0.8);
  const auto idle =
      std::find_if(launch_bound.warnings.begin(), launch_bound.warnings.end(),
                   [](const std::string& w) { return w.find("kept the device busy") != std::string::npos; });
  ASSERT_NE(idle, launch_bound.warnings.end()) << ::testing::PrintToString(launch_bound.warnings);
  EXPECT_TRUE(std::regex_search(*idle, std::regex(R"(\(dense [0-9]+%, twell [0-9]+%\))"))) << *idle;
  EXPECT_NE(idle->find("--batch"), std::string::npos) << *idle;

  // CPU timings have their own warning; this one is about a device left waiting.
  SessionFixture cpu;
  cpu.backend.device_info = {"cpu", "Some CPU", "", 2, 0, "", "", "cpu-reference"};
  cpu.tracer.set_gap_ns(2'000);
  for (const auto& warning : cpu.run().warnings)
    EXPECT_EQ(warning.find("kept the device busy"), std::string::npos) << warning;
}

TEST(Session, ProgressIsMonotoneAndEndsDone) {
  SessionFixture f;
  std::vector<twell::SessionProgress> events;
  f.run([&](const twell::SessionProgress& p) {
    events.push_back(p);
    return true;
  });
  ASSERT_GE(events.size(), 3u + 2u * 5u);
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_GE(events[i].fraction, events[i - 1].fraction) << i;
    EXPECT_LE(events[i].fraction, 1.0);
  }
  EXPECT_EQ(events.back().stage, "done");
  EXPECT_DOUBLE_EQ(events.back().fraction, 1.0);
  std::vector<std::size_t> layers_seen;
  for (const auto& e : events)
    if (e.stage == "layers") {
      EXPECT_EQ(e.layer_count, 3u);
      // Within a layer the session may also tick (rate-limited): same layer count again.
      if (layers_seen.empty() || layers_seen.back() != e.layer) layers_seen.push_back(e.layer);
    }
  EXPECT_EQ(layers_seen, (std::vector<std::size_t>{0, 1, 2, 3}));
  const auto& last_forward = events[events.size() - 2];
  EXPECT_EQ(last_forward.stage, "end_to_end");
  EXPECT_EQ(last_forward.layer, last_forward.layer_count);
  EXPECT_EQ(last_forward.layer_count, 2u * 5u);
  EXPECT_TRUE(last_forward.seconds_left.has_value());
}

TEST(Session, CancellingThrowsCancelledAndProducesNoReport) {
  for (double cancel_at : {0.0, 0.2, 0.9}) {
    SessionFixture f;
    std::optional<twell::Report> report;
    try {
      report = f.run([&](const twell::SessionProgress& p) { return p.fraction < cancel_at; });
      ADD_FAILURE() << "not cancelled at " << cancel_at;
    } catch (const twell::Error& e) {
      EXPECT_EQ(e.kind(), twell::Error::Kind::Cancelled);
    }
    EXPECT_FALSE(report.has_value());
  }
}

TEST(Session, RejectsBadConfigurations) {
  auto expect_invalid = [](auto change, const std::string& needle) {
    SessionFixture f;
    change(f);
    try {
      f.run();
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const twell::Error& e) {
      EXPECT_EQ(e.kind(), twell::Error::Kind::InvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(f.backend.forwards, 0);
  };
  expect_invalid([](SessionFixture& f) { f.config.paths.clear(); }, "no FFN path");
  expect_invalid(
      [](SessionFixture& f) {
        f.config.paths = {"dense", "sparse"};
      },
      "unknown FFN path \"sparse\"");
  expect_invalid([](SessionFixture& f) { f.config.paths = {"dense", "dense"}; }, "listed twice");
  expect_invalid([](SessionFixture& f) { f.config.compression = 3; }, "C=3 is not one of 8, 4, 2");
  expect_invalid([](SessionFixture& f) { f.config.repetitions = 0; }, "at least one timed repetition");
  expect_invalid(
      [](SessionFixture& f) {
        f.config.layers = {0, 3};
      },
      "layer 3 does not exist (the model has 3 layers");
  expect_invalid([](SessionFixture& f) { f.tokens = {}; }, "token batch is empty");
  for (const double outside : {0.0, 1.0, -0.5})
    expect_invalid([outside](SessionFixture& f) { f.config.dispatch_break_even = outside; },
                   "is not a density fraction in (0, 1)");
}

TEST(Session, TwellKernelsTheBackendCannotChooseAreRefusedBeforeAnythingRuns) {
  SessionFixture f;
  f.config.twell_kernels.overflow = "sparse";
  try {
    f.run();
    ADD_FAILURE() << "a backend without kernel choices accepted a kernel request";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("TwELL kernels auto/auto/sparse were requested, but the "
                                         "hopper-sm90a backend runs one kernel per FFN stage"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f.backend.forwards, 0);
}

TEST(Session, AFailurePartWayKeepsTheReportOfTheFinishedLayers) {
  SessionFixture f;
  f.backend.fail_in_layer = 2;
  try {
    f.run();
    FAIL() << "the scripted fault did not stop the run";
  } catch (const twell::IncompleteRunError& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Device);
    EXPECT_NE(std::string(e.what()).find("scripted device fault in layer 2"), std::string::npos) << e.what();
    const twell::Report& partial = e.partial_report();
    ASSERT_EQ(partial.layers.size(), 2u);
    EXPECT_EQ(partial.layers[0].index, 0);
    EXPECT_EQ(partial.layers[1].index, 1);
    EXPECT_EQ(partial.config.layers, (std::vector<int>{0, 1}));
    EXPECT_FALSE(partial.config.end_to_end);
    EXPECT_TRUE(partial.end_to_end.empty());
    EXPECT_DOUBLE_EQ(partial.layers[1].paths[0].total.median_us, 4.0);
    EXPECT_EQ(partial.layers[1].sparsity.neurons, kNeurons);
    for (const auto& kernel : partial.kernels) EXPECT_LT(kernel.layer, 2) << kernel.name;
    for (const auto& record : partial.timeline) EXPECT_LT(record.tag.layer, 2) << record.name;
    ASSERT_FALSE(partial.warnings.empty());
    EXPECT_EQ(
        partial.warnings.front().rfind("INCOMPLETE: the run failed during the per-layer comparison after 2 "
                                       "of 3 selected layers",
                                       0),
        0u)
        << partial.warnings.front();
    // What a front end writes must read back as a valid report.
    const twell::Report reread = twell::parse_report(twell::report_to_json_text(partial), "partial");
    EXPECT_EQ(reread.layers.size(), 2u);
    EXPECT_EQ(reread.warnings.front(), partial.warnings.front());
  }
}

TEST(Session, AFailureInTheEndToEndForwardsKeepsEveryLayer) {
  SessionFixture f;
  f.backend.fail_end_to_end = true;
  try {
    f.run();
    FAIL() << "the scripted fault did not stop the run";
  } catch (const twell::IncompleteRunError& e) {
    const twell::Report& partial = e.partial_report();
    EXPECT_EQ(partial.layers.size(), 3u);
    EXPECT_TRUE(partial.end_to_end.empty());
    EXPECT_NE(partial.warnings.front().find("during the end-to-end forwards after 3 of 3"), std::string::npos)
        << partial.warnings.front();
    EXPECT_NO_THROW(twell::parse_report(twell::report_to_json_text(partial), "partial"));
  }
}

TEST(Session, AFailureBeforeAnyLayerFinishedRethrowsTheCause) {
  SessionFixture f;
  f.backend.fail_in_layer = 0;
  try {
    f.run();
    FAIL() << "the scripted fault did not stop the run";
  } catch (const twell::IncompleteRunError&) {
    FAIL() << "no layer finished, so there is no report to keep";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Device);
    EXPECT_STREQ(e.what(), "scripted device fault in layer 0");
  }
}
