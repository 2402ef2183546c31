// SPDX-License-Identifier: GPL-3.0-or-later
// The CUPTI boundary without a GPU: handcrafted activity records (as CUPTI lays them out in its
// buffers) go through the tracer's parser and the tag join, so the conversion to KernelRecord
// and the attribution by external correlation are checked on any machine with libcupti.
// White-box: it includes the cupti library's private header on purpose.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "../../cupti/src/activity_records.hpp"
#include "twell/trace_attribution.hpp"

namespace {

using twell::KernelRecord;
using twell::TraceTag;
namespace detail = twell::gpu_trace::detail;

/// An 8-byte-aligned buffer of records laid end to end, as CUPTI fills its buffers.
class RecordBuffer {
 public:
  template <typename Record>
  Record& add() {
    const std::size_t offset = m_used;
    m_used += sizeof(Record);
    if (m_used > m_bytes.size() * sizeof(std::uint64_t)) throw std::length_error("RecordBuffer is full");
    auto* record = reinterpret_cast<Record*>(reinterpret_cast<std::uint8_t*>(m_bytes.data()) + offset);
    std::memset(static_cast<void*>(record), 0, sizeof(Record));
    return *record;
  }
  std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(m_bytes.data()); }
  std::size_t size() const { return m_used; }

 private:
  std::vector<std::uint64_t> m_bytes = std::vector<std::uint64_t>(2048);
  std::size_t m_used = 0;
};

detail::KernelActivity& add_kernel(RecordBuffer& buffer, const char* name, std::uint64_t start,
                                   std::uint64_t end, std::uint32_t correlation) {
  auto& kernel = buffer.add<detail::KernelActivity>();
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = name;
  kernel.start = start;
  kernel.end = end;
  kernel.correlationId = correlation;
  return kernel;
}

void add_link(RecordBuffer& buffer, CUpti_ExternalCorrelationKind kind, std::uint64_t external,
              std::uint32_t correlation) {
  auto& link = buffer.add<CUpti_ActivityExternalCorrelation>();
  link.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  link.externalKind = kind;
  link.externalId = external;
  link.correlationId = correlation;
}

TEST(CuptiRecords, KernelFieldsCrossTheBoundaryDemangled) {
  RecordBuffer buffer;
  auto& kernel = add_kernel(buffer, "_ZN5twell6kernel4spinEPfi", 1'000, 3'500, 17);
  kernel.deviceId = 1;
  kernel.contextId = 2;
  kernel.streamId = 13;
  kernel.gridX = 64;
  kernel.gridY = 2;
  kernel.gridZ = 1;
  kernel.blockX = 256;
  kernel.blockY = 1;
  kernel.blockZ = 1;
  kernel.registersPerThread = 40;
  kernel.staticSharedMemory = 1024;
  kernel.dynamicSharedMemory = 49152;
  twell::TagCorrelator correlator;
  detail::BufferTally tally;
  detail::feed_buffer(buffer.data(), buffer.size(), correlator, tally);
  const auto records = correlator.take_attributed();
  ASSERT_EQ(records.size(), 1u);
  const KernelRecord& record = records[0];
  EXPECT_EQ(record.kind, "kernel");
  EXPECT_EQ(record.name, "twell::kernel::spin(float*, int)");
  EXPECT_EQ(record.start_ns, 1'000u);
  EXPECT_EQ(record.end_ns, 3'500u);
  EXPECT_EQ(record.device, 1u);
  EXPECT_EQ(record.context, 2u);
  EXPECT_EQ(record.stream, 13u);
  EXPECT_EQ(record.grid, (std::array<std::int32_t, 3>{64, 2, 1}));
  EXPECT_EQ(record.block, (std::array<std::int32_t, 3>{256, 1, 1}));
  EXPECT_EQ(record.registers_per_thread, 40);
  EXPECT_EQ(record.static_shared_bytes, 1024);
  EXPECT_EQ(record.dynamic_shared_bytes, 49152);
  EXPECT_EQ(record.correlation_id, 17u);
  EXPECT_FALSE(record.attributed);  // no external correlation was recorded for it
  EXPECT_EQ(tally.incomplete, 0u);
}

TEST(CuptiRecords, CopiesAndMemsetsKeepDirectionAndBytes) {
  RecordBuffer buffer;
  auto& copy = buffer.add<detail::MemcpyActivity>();
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.bytes = 1 << 20;
  copy.start = 10;
  copy.end = 20;
  copy.correlationId = 1;
  auto& memset = buffer.add<detail::MemsetActivity>();
  memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset.bytes = 4096;
  memset.start = 5;
  memset.end = 8;
  memset.correlationId = 2;
  twell::TagCorrelator correlator;
  detail::BufferTally tally;
  detail::feed_buffer(buffer.data(), buffer.size(), correlator, tally);
  const auto records = correlator.take_attributed();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, "memset");  // ordered by start
  EXPECT_EQ(records[0].bytes, 4096u);
  EXPECT_EQ(records[1].kind, "memcpy");
  EXPECT_EQ(records[1].name, "memcpy DtoH");
  EXPECT_EQ(records[1].bytes, std::uint64_t{1} << 20);
}

TEST(CuptiRecords, ExternalCorrelationsOfOurKindAttributeEveryKernelOfACall) {
  twell::TagCorrelator correlator;
  const TraceTag gemm{"layer_ffn", 5, "dense", "gate_up", 3, false};
  const std::uint64_t id = correlator.open(gemm);
  correlator.close(id);

  RecordBuffer buffer;
  // A cuBLAS call: two launches (correlations 40 and 41) under our id, recorded before and
  // after their kernels, plus a link of another tool's kind that must be ignored.
  add_link(buffer, detail::kTagCorrelationKind, id, 40);
  add_kernel(buffer, "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNN", 2'000, 9'000, 40);
  add_kernel(buffer, "_Z13splitk_reducePKfPfi", 9'100, 9'600, 41);
  add_link(buffer, detail::kTagCorrelationKind, id, 41);
  add_link(buffer, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, id, 42);
  add_kernel(buffer, "other_tools_kernel", 10'000, 11'000, 42);
  // A kernel CUPTI could not time.
  add_kernel(buffer, "untimed", 0, 0, 43);
  detail::BufferTally tally;
  detail::feed_buffer(buffer.data(), buffer.size(), correlator, tally);
  EXPECT_EQ(tally.incomplete, 1u);
  const auto records = correlator.take_attributed();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].name, "untimed");  // start 0 sorts first
  EXPECT_FALSE(detail::has_times(records[0]));
  EXPECT_EQ(records[1].name, "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNN");  // not mangled: unchanged
  EXPECT_TRUE(records[1].attributed);
  EXPECT_EQ(records[1].tag, gemm);
  EXPECT_EQ(records[2].name, "splitk_reduce(float const*, float*, int)");
  EXPECT_TRUE(records[2].attributed);
  EXPECT_EQ(records[2].tag, gemm);
  EXPECT_EQ(records[3].name, "other_tools_kernel");
  EXPECT_FALSE(records[3].attributed);

  std::vector<KernelRecord> kept = records;
  EXPECT_EQ(detail::drop_untimed(kept), 0u);  // the untimed one was nobody's
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].name, records[1].name);
  std::vector<KernelRecord> tagged_untimed = records;
  tagged_untimed[0].attributed = true;
  EXPECT_EQ(detail::drop_untimed(tagged_untimed), 1u);
}

TEST(CuptiRecords, DemangleLeavesPlainNamesAlone) {
  EXPECT_EQ(detail::demangle(nullptr), "<unnamed>");
  EXPECT_EQ(detail::demangle("nvjet_tst_64x8"), "nvjet_tst_64x8");
  EXPECT_EQ(detail::demangle("_Z3fooi"), "foo(int)");
}

}  // namespace
