// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scripted_tracer.hpp"
#include "twell/error.hpp"
#include "twell/timing_aggregate.hpp"
#include "twell/trace_attribution.hpp"
#include "twell/tracer_choice.hpp"

namespace {

using twell::KernelRecord;
using twell::ScopedTrace;
using twell::TraceTag;
using twell::test::ScriptedLaunch;
using twell::test::ScriptedTracer;

TraceTag ffn_tag(int layer, const std::string& path, const std::string& op, int repetition,
                 bool warmup = false) {
  return TraceTag{"layer_ffn", layer, path, op, repetition, warmup};
}

/// A cuBLAS-like script: gate_up launches a GEMM and a split-K reduction, down one GEMM.
/// Warm-ups are ten times slower, as lazily loaded modules make first launches.
std::vector<ScriptedLaunch> ffn_script(const TraceTag& tag) {
  const std::uint64_t slow = tag.warmup ? 10 : 1;
  if (tag.op == "gate_up") return {{"nvjet_gemm", 4'000 * slow}, {"splitk_reduce", 1'000 * slow}};
  if (tag.op == "down") return {{"nvjet_gemm", 2'000 * slow}};
  return {};
}

void run_layer(twell::Tracer& tracer, int layer, const std::string& path, int warmups, int repetitions) {
  for (int i = 0; i < warmups + repetitions; ++i) {
    const bool warmup = i < warmups;
    const int rep = warmup ? i : i - warmups;
    { ScopedTrace scope(&tracer, ffn_tag(layer, path, "gate_up", rep, warmup)); }
    { ScopedTrace scope(&tracer, ffn_tag(layer, path, "down", rep, warmup)); }
  }
}

TEST(TagAttribution, EveryLaunchOfAGroupGetsItsTagWithoutMatchingNames) {
  ScriptedTracer tracer;
  tracer.set_script(ffn_script);
  run_layer(tracer, 4, "dense", 0, 2);
  const auto records = tracer.collect();
  ASSERT_EQ(records.size(), 6u);  // 2 repetitions x (2 + 1) kernels
  for (const KernelRecord& record : records) {
    EXPECT_TRUE(record.attributed) << record.name;
    EXPECT_EQ(record.tag.layer, 4);
    EXPECT_EQ(record.tag.path, "dense");
  }
  // The same kernel name appears under two ops: attribution comes from the tag, not the name.
  EXPECT_EQ(records[0].tag.op, "gate_up");
  EXPECT_EQ(records[1].tag.op, "gate_up");
  EXPECT_EQ(records[1].name, "splitk_reduce");
  EXPECT_EQ(records[2].tag.op, "down");
  EXPECT_EQ(records[2].name, "nvjet_gemm");
  EXPECT_EQ(records[3].tag.repetition, 1);
}

TEST(TagAttribution, LaunchesOutsideAnyTagStayUnattributed) {
  ScriptedTracer tracer;
  tracer.launch({"library_setup", 100});
  {
    ScopedTrace scope(&tracer, ffn_tag(0, "twell", "gate_pack", 0));
    tracer.launch({"gate_pack_kernel", 300});
  }
  tracer.launch({"cleanup", 100});
  const auto records = tracer.collect();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_FALSE(records[0].attributed);
  EXPECT_EQ(records[0].tag, TraceTag{});
  EXPECT_TRUE(records[1].attributed);
  EXPECT_EQ(records[1].tag.op, "gate_pack");
  EXPECT_FALSE(records[2].attributed);
}

TEST(TagAttribution, NestedTagsAttributeToTheInnermost) {
  ScriptedTracer tracer;
  {
    ScopedTrace forward(&tracer, TraceTag{"end_to_end", -1, "dense", "forward", 0, false});
    tracer.launch({"embedding", 100});
    {
      ScopedTrace ffn(&tracer, ffn_tag(0, "dense", "gate_up", 0));
      tracer.launch({"gemm", 100});
    }
    tracer.launch({"final_norm", 100});
  }
  const auto records = tracer.collect();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].tag.op, "forward");
  EXPECT_EQ(records[1].tag.op, "gate_up");
  EXPECT_EQ(records[2].tag.op, "forward");
}

TEST(TagAttribution, RecordsDeliveredOutOfOrderComeBackOrderedByStart) {
  ScriptedTracer tracer;
  tracer.set_script(ffn_script);
  tracer.set_deliver_in_reverse(true);
  run_layer(tracer, 0, "dense", 1, 3);
  const auto records = tracer.collect();
  ASSERT_EQ(records.size(), 12u);
  EXPECT_TRUE(
      std::is_sorted(records.begin(), records.end(),
                     [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; }));
  for (std::size_t i = 1; i < records.size(); ++i) EXPECT_LE(records[i - 1].end_ns, records[i].start_ns);
}

TEST(TagAttribution, CollectReturnsOnlyNewRecordsAndKeepsOpenTags) {
  ScriptedTracer tracer;
  tracer.push(ffn_tag(1, "twell", "up_down", 0));
  tracer.launch({"first", 100});
  const auto first = tracer.collect();
  tracer.launch({"second", 100});
  tracer.pop();
  const auto second = tracer.collect();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].name, "second");
  EXPECT_TRUE(second[0].attributed);  // its tag was still open across the first collect
  EXPECT_EQ(second[0].tag.op, "up_down");
  EXPECT_TRUE(tracer.collect().empty());
}

TEST(TagAttribution, PopWithoutPushIsAnError) {
  ScriptedTracer tracer;
  EXPECT_THROW(tracer.pop(), twell::Error);
}

TEST(TagCorrelator, JoinsWhateverOrderPairsAndRecordsArriveIn) {
  twell::TagCorrelator correlator;
  const auto gate = correlator.open(ffn_tag(0, "dense", "gate_up", 0));
  const auto down = correlator.open(ffn_tag(0, "dense", "down", 0));
  EXPECT_NE(gate, down);
  EXPECT_NE(gate, 0u);
  EXPECT_EQ(correlator.open_count(), 2u);
  correlator.close(down);
  correlator.close(gate);
  EXPECT_THROW(correlator.close(gate), twell::Error);

  KernelRecord late;
  late.name = "late";
  late.start_ns = 50;
  late.end_ns = 60;
  late.correlation_id = 7;
  correlator.add_record(late);  // the record before its pair
  correlator.add_correlation(7, down);
  KernelRecord early = late;
  early.name = "early";
  early.start_ns = 10;
  early.correlation_id = 3;
  correlator.add_correlation(3, gate);
  correlator.add_record(early);
  KernelRecord foreign = late;
  foreign.name = "foreign";
  foreign.start_ns = 30;
  foreign.correlation_id = 9;
  correlator.add_correlation(9, 12345);  // an id this correlator never issued
  correlator.add_record(foreign);

  const auto records = correlator.take_attributed();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].name, "early");
  EXPECT_EQ(records[0].tag.op, "gate_up");
  EXPECT_FALSE(records[1].attributed);
  EXPECT_EQ(records[2].name, "late");
  EXPECT_EQ(records[2].tag.op, "down");
  EXPECT_TRUE(correlator.take_attributed().empty());
}

TEST(Aggregation, WarmupsAreExcludedFromPerPathStatistics) {
  ScriptedTracer tracer;
  tracer.set_script(ffn_script);
  run_layer(tracer, 0, "dense", 2, 5);
  const auto records = tracer.collect();
  const auto paths = twell::timing::path_timings(records, 0);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].total.count, 5u);
  EXPECT_DOUBLE_EQ(paths[0].total.median_us, 7.0);  // 4 + 1 + 2 us; warm-ups were 70 us
  EXPECT_DOUBLE_EQ(paths[0].total.max_us, 7.0);
  ASSERT_EQ(paths[0].ops.size(), 2u);
  EXPECT_DOUBLE_EQ(paths[0].ops[0].time.median_us, 5.0);
  EXPECT_DOUBLE_EQ(paths[0].ops[1].time.median_us, 2.0);
  const auto kernels = twell::timing::kernel_stats(records);
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_EQ(kernels[1].name, "splitk_reduce");
  EXPECT_EQ(kernels[1].time.count, 5u);
}

TEST(Aggregation, RegionTracerGivesOneRecordPerRegionNamedAfterItsOp) {
  ScriptedTracer tracer(ScriptedTracer::Mode::Region, "CUPTI is owned by another tool");
  tracer.set_script(ffn_script);
  tracer.set_gap_ns(0);
  run_layer(tracer, 3, "twell", 1, 4);
  EXPECT_FALSE(tracer.info().per_kernel);
  EXPECT_EQ(tracer.info().fallback_reason, "CUPTI is owned by another tool");
  const auto records = tracer.collect();
  ASSERT_EQ(records.size(), 10u);
  EXPECT_EQ(records[0].kind, "region");
  EXPECT_EQ(records[0].name, "gate_up");
  const auto paths = twell::timing::path_timings(records, 3);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].total.count, 4u);
  EXPECT_DOUBLE_EQ(paths[0].total.median_us, 7.0);  // same work as per kernel, no gaps
  EXPECT_EQ(tracer.open_depth(), 0u);
}

TEST(TracerChoice, CuptiWhenItSubscribes) {
  const auto choice = twell::choose_gpu_tracer(std::nullopt);
  EXPECT_EQ(choice.kind, twell::GpuTracerKind::Cupti);
  EXPECT_TRUE(choice.fallback_reason.empty());
}

TEST(TracerChoice, CudaEventsWithTheReasonWhenCuptiCannotSubscribe) {
  using Cause = twell::CuptiUnavailable::Cause;
  for (const Cause cause : {Cause::AnotherSubscriber, Cause::InsufficientPrivileges, Cause::NoDriver,
                            Cause::AlreadyInUse, Cause::Other}) {
    const twell::CuptiUnavailable failure{cause, "cuptiSubscribe_v2: detail " + std::to_string(int(cause))};
    const auto choice = twell::choose_gpu_tracer(failure);
    EXPECT_EQ(choice.kind, twell::GpuTracerKind::CudaEvents);
    EXPECT_NE(choice.fallback_reason.find(twell::to_string(cause)), std::string::npos)
        << choice.fallback_reason;
    EXPECT_NE(choice.fallback_reason.find(failure.detail), std::string::npos) << choice.fallback_reason;
  }
  const auto nsight =
      twell::choose_gpu_tracer(twell::CuptiUnavailable{Cause::AnotherSubscriber, "Nsight Systems"});
  EXPECT_NE(nsight.fallback_reason.find("another tool"), std::string::npos);
  EXPECT_NE(nsight.fallback_reason.find("Nsight Systems"), std::string::npos);
}

TEST(TraceTagLabel, NamesLayerPathOpAndRepetition) {
  EXPECT_EQ(twell::trace_tag_label(ffn_tag(3, "dense", "gate_up", 2)), "L3 dense/gate_up r2");
  EXPECT_EQ(twell::trace_tag_label(TraceTag{"end_to_end", -1, "twell", "forward", 0, true}),
            "end_to_end twell/forward r0 (warm-up)");
  EXPECT_EQ(twell::trace_tag_label(TraceTag{}), "untagged r0");
}

}  // namespace
