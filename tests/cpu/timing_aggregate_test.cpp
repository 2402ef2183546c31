// SPDX-License-Identifier: GPL-3.0-or-later
#include "twell/timing_aggregate.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "twell/error.hpp"

namespace {

using twell::KernelRecord;
using twell::TraceTag;
namespace timing = twell::timing;

KernelRecord make_record(const std::string& name, std::uint64_t start_ns, std::uint64_t duration_ns,
                         TraceTag tag, bool attributed = true) {
  KernelRecord record;
  record.name = name;
  record.start_ns = start_ns;
  record.end_ns = start_ns + duration_ns;
  record.tag = std::move(tag);
  record.attributed = attributed;
  return record;
}

TraceTag ffn_tag(int layer, const std::string& path, const std::string& op, int repetition,
                 bool warmup = false) {
  return TraceTag{"layer_ffn", layer, path, op, repetition, warmup};
}

TEST(Summarize, OddCountTakesTheMiddleSample) {
  const auto stat = timing::summarize({5.0, 1.0, 3.0});
  EXPECT_DOUBLE_EQ(stat.median_us, 3.0);
  EXPECT_DOUBLE_EQ(stat.min_us, 1.0);
  EXPECT_DOUBLE_EQ(stat.max_us, 5.0);
  EXPECT_EQ(stat.count, 3u);
}

TEST(Summarize, EvenCountAveragesTheTwoMiddleSamples) {
  const auto stat = timing::summarize({4.0, 1.0, 10.0, 2.0});
  EXPECT_DOUBLE_EQ(stat.median_us, 3.0);
  EXPECT_EQ(stat.count, 4u);
}

TEST(Summarize, NoSamplesIsAllZero) {
  EXPECT_EQ(timing::summarize({}), twell::TimingStat{});
}

TEST(MedianOfRatios, PairsSamplesTakenSideBySide) {
  // A drift that slows both contenders late in the run cancels within each pair: every ratio is 0.5,
  // while the ratio of the separate medians (3 / 4) is not.
  EXPECT_DOUBLE_EQ(twell::timing::median_of_ratios({1, 2, 3, 8, 16}, {2, 4, 6, 16, 32}), 0.5);
  EXPECT_DOUBLE_EQ(twell::timing::median_of_ratios({1, 3}, {1, 1}), 2.0);
  EXPECT_DOUBLE_EQ(twell::timing::median_of_ratios({}, {}), 0.0);
}

TEST(MedianOfRatios, RejectsMismatchedOrNonPositiveSamples) {
  EXPECT_THROW(twell::timing::median_of_ratios({1, 2}, {1}), twell::Error);
  EXPECT_THROW(twell::timing::median_of_ratios({1}, {0}), twell::Error);
}

TEST(RecordFilter, ExcludesWarmupAndUnattributedRecords) {
  const timing::RecordFilter any;
  EXPECT_TRUE(any.matches(make_record("k", 0, 10, ffn_tag(0, "dense", "gate_up", 0))));
  EXPECT_FALSE(any.matches(make_record("k", 0, 10, ffn_tag(0, "dense", "gate_up", 0, true))));
  EXPECT_FALSE(any.matches(make_record("k", 0, 10, ffn_tag(0, "dense", "gate_up", 0), false)));
  const timing::RecordFilter twell_only{.path = "twell"};
  EXPECT_FALSE(twell_only.matches(make_record("k", 0, 10, ffn_tag(0, "dense", "gate_up", 0))));
}

TEST(BusyTime, SumsDurationsPerRepetitionAndSkipsWarmups) {
  const std::vector<KernelRecord> records = {
      // A slow warm-up (lazy module loading) that must not count.
      make_record("gemm", 0, 90'000, ffn_tag(0, "dense", "gate_up", 0, true)),
      make_record("gemm", 100'000, 2'000, ffn_tag(0, "dense", "gate_up", 0)),
      make_record("gemm_splitk_reduce", 102'500, 500, ffn_tag(0, "dense", "gate_up", 0)),
      make_record("gemm", 110'000, 3'000, ffn_tag(0, "dense", "gate_up", 1)),
  };
  const auto busy = timing::busy_us_per_repetition(records, {.op = "gate_up"});
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_DOUBLE_EQ(busy.at(0), 2.5);
  EXPECT_DOUBLE_EQ(busy.at(1), 3.0);
  const auto stat = timing::busy_stat(records, {.op = "gate_up"});
  EXPECT_EQ(stat.count, 2u);
  EXPECT_DOUBLE_EQ(stat.max_us, 3.0);
}

TEST(SpanTime, IsLastEndMinusFirstStartIncludingGaps) {
  const TraceTag forward{"end_to_end", -1, "twell", "forward", 0, false};
  TraceTag second = forward;
  second.repetition = 1;
  const std::vector<KernelRecord> records = {
      make_record("embed", 1'000, 1'000, forward), make_record("ffn", 5'000, 2'000, forward),
      make_record("norm", 3'000, 500, forward), make_record("embed", 20'000, 4'000, second)};
  const auto spans = timing::span_us_per_repetition(records, {.phase = "end_to_end"});
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_DOUBLE_EQ(spans.at(0), 6.0);  // 1000 .. 7000 ns
  EXPECT_DOUBLE_EQ(spans.at(1), 4.0);
  const auto stat = timing::span_stat(records, {.phase = "end_to_end", .path = "twell"});
  EXPECT_DOUBLE_EQ(stat.median_us, 5.0);
  EXPECT_EQ(timing::span_stat(records, {.phase = "end_to_end", .path = "dense"}).count, 0u);
}

TEST(OccupiedTime, IsTheUnionOfTheIntervalsWithOverlapsCountedOnce) {
  const TraceTag forward{"end_to_end", -1, "twell", "forward", 0, false};
  TraceTag second = forward, warmup = forward;
  second.repetition = 1;
  warmup.warmup = true;
  const std::vector<KernelRecord> records = {
      make_record("ffn", 2'000, 2'000, forward),     // overlaps the next on a side stream
      make_record("embed", 1'000, 2'000, forward),   // given out of start order
      make_record("inside", 1'500, 1'000, forward),  // within the stretch: adds nothing
      make_record("norm", 6'000, 1'000, forward),    // after a 2 us gap
      make_record("empty", 6'500, 0, forward),       // no duration
      make_record("cold", 0, 50'000, warmup),        // a warm-up, not counted
      make_record("unowned", 8'000, 5'000, forward, false),
      make_record("embed", 20'000, 2'500, second)};
  const auto occupied = timing::occupied_us_per_repetition(records, {.phase = "end_to_end"});
  ASSERT_EQ(occupied.size(), 2u);
  EXPECT_DOUBLE_EQ(occupied.at(0), 4.0);  // 1000 .. 4000 and 6000 .. 7000 ns
  EXPECT_DOUBLE_EQ(occupied.at(1), 2.5);
  EXPECT_DOUBLE_EQ(timing::span_us_per_repetition(records, {.phase = "end_to_end"}).at(0), 6.0);
  const auto stat = timing::occupied_stat(records, {.phase = "end_to_end", .path = "twell"});
  EXPECT_EQ(stat.count, 2u);
  EXPECT_DOUBLE_EQ(stat.median_us, 3.25);
  EXPECT_EQ(timing::occupied_stat(records, {.phase = "end_to_end", .path = "dense"}).count, 0u);
}

TEST(PathTimings, TotalsAndOpsPerPathInOrderOfFirstStart) {
  std::vector<KernelRecord> records;
  std::uint64_t t = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const std::uint64_t scale = rep + 1;  // repetition r takes (r + 1) x the base time
    records.push_back(
        make_record("dense_gemm", t += 100, 4'000 * scale, ffn_tag(2, "dense", "gate_up", rep)));
    records.push_back(
        make_record("dense_down", t += 5'000 * scale, 2'000 * scale, ffn_tag(2, "dense", "down", rep)));
    records.push_back(
        make_record("gate_pack", t += 3'000 * scale, 1'000 * scale, ffn_tag(2, "twell", "gate_pack", rep)));
    records.push_back(
        make_record("up_down", t += 2'000 * scale, 500 * scale, ffn_tag(2, "twell", "up_down", rep)));
    t += 1'000 * scale;
  }
  // Another layer and a warm-up must not leak in.
  records.push_back(make_record("dense_gemm", t += 100, 99'000, ffn_tag(3, "dense", "gate_up", 0)));
  records.push_back(make_record("dense_gemm", t += 100'000, 99'000, ffn_tag(2, "dense", "gate_up", 7, true)));
  std::reverse(records.begin(), records.end());  // input order does not matter

  const auto paths = timing::path_timings(records, 2);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].path, "dense");
  EXPECT_EQ(paths[1].path, "twell");
  EXPECT_EQ(paths[0].total.count, 3u);
  EXPECT_DOUBLE_EQ(paths[0].total.median_us, 12.0);  // (4 + 2) x 2
  EXPECT_DOUBLE_EQ(paths[0].total.min_us, 6.0);
  EXPECT_DOUBLE_EQ(paths[0].total.max_us, 18.0);
  ASSERT_EQ(paths[0].ops.size(), 2u);
  EXPECT_EQ(paths[0].ops[0].op, "gate_up");
  EXPECT_DOUBLE_EQ(paths[0].ops[0].time.median_us, 8.0);
  EXPECT_EQ(paths[0].ops[1].op, "down");
  ASSERT_EQ(paths[1].ops.size(), 2u);
  EXPECT_EQ(paths[1].ops[0].op, "gate_pack");
  EXPECT_EQ(paths[1].ops[1].op, "up_down");
  EXPECT_DOUBLE_EQ(paths[1].total.median_us, 3.0);  // (1 + 0.5) x 2
  EXPECT_EQ(paths[1].overflow_rows, 0u);
  EXPECT_TRUE(timing::path_timings(records, 9).empty());
}

TEST(KernelStats, OneEntryPerNameWithinEachOpSummingRepeatedLaunches) {
  std::vector<KernelRecord> records;
  for (int rep = 0; rep < 2; ++rep) {
    const std::uint64_t base = 1'000'000ull * (rep + 1);
    // cuBLAS-like: one call, three kernels, one of them launched twice.
    records.push_back(make_record("nvjet_gemm", base, 3'000, ffn_tag(0, "dense", "gate_up", rep)));
    records.push_back(make_record("splitk_reduce", base + 4'000, 500, ffn_tag(0, "dense", "gate_up", rep)));
    records.push_back(make_record("splitk_reduce", base + 5'000, 700, ffn_tag(0, "dense", "gate_up", rep)));
    records.push_back(make_record("nvjet_gemm", base + 9'000, 1'000, ffn_tag(0, "dense", "down", rep)));
  }
  records.push_back(make_record("nvjet_gemm", 0, 50'000, ffn_tag(0, "dense", "gate_up", 0, true)));
  const auto stats = timing::kernel_stats(records);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].name, "nvjet_gemm");
  EXPECT_EQ(stats[0].op, "gate_up");
  EXPECT_EQ(stats[0].layer, 0);
  EXPECT_EQ(stats[0].path, "dense");
  EXPECT_DOUBLE_EQ(stats[0].time.max_us, 3.0);  // the warm-up's 50 us is excluded
  EXPECT_EQ(stats[0].time.count, 2u);
  EXPECT_EQ(stats[1].name, "splitk_reduce");
  EXPECT_DOUBLE_EQ(stats[1].time.median_us, 1.2);
  EXPECT_EQ(stats[2].name, "nvjet_gemm");
  EXPECT_EQ(stats[2].op, "down");
  EXPECT_TRUE(timing::kernel_stats(records, "end_to_end").empty());
}

TEST(Timeline, SelectsOneRepetitionOrderedByStart) {
  const std::vector<KernelRecord> records = {
      make_record("b", 3'000, 100, ffn_tag(0, "twell", "up_down", 1)),
      make_record("warm", 10, 100, ffn_tag(0, "twell", "up_down", 0, true)),
      make_record("a", 2'000, 100, ffn_tag(1, "dense", "gate_up", 1)),
      make_record("other", 2'500, 100, ffn_tag(0, "dense", "gate_up", 2)),
      make_record("stray", 2'600, 100, TraceTag{}, false),
  };
  EXPECT_EQ(timing::first_timed_repetition(records), 1);
  EXPECT_EQ(timing::first_timed_repetition(records, {.path = "nothing"}), std::nullopt);
  const auto timeline = timing::records_of_repetition(records, 1);
  ASSERT_EQ(timeline.size(), 2u);
  EXPECT_EQ(timeline[0].name, "a");
  EXPECT_EQ(timeline[1].name, "b");
  EXPECT_EQ(timing::records_of_repetition(records, 1, {.layer = 0}).size(), 1u);
}

}  // namespace
