// SPDX-License-Identifier: GPL-3.0-or-later
// Telling which kernel variant produced a traced kernel: by its function name inside a demangled
// signature, or, for a library's kernels, by the op they were tagged with.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include "twell/backend.hpp"
#include "twell/kernel_variant.hpp"
#include "twell/report_views.hpp"

namespace {

twell::KernelRecord record_of(std::string name, std::string op, std::string kind = "kernel") {
  twell::KernelRecord record;
  record.kind = std::move(kind);
  record.name = std::move(name);
  record.tag.op = std::move(op);
  return record;
}

const std::vector<twell::KernelVariant> kVariants = {
    {"twell_up_down_kernel", false, "twell", "up_down", "sm_80+", "one CTA per token"},
    {"twell_up_down_warp_kernel", false, "twell", "up_down", "sm_80+", "one warp per token"},
    {"cuBLASLt bf16 GEMM", true, "dense", "gate_up", "any", "x Wg^T and x Wu^T"},
    {"cpu:up_down", false, "twell", "up_down", "any CPU", "per token, per non-zero"},
    {"twell_up_down_kernel", false, "twell", "overflow_sparse", "sm_80+", "the overflowing rows"},
};

}  // namespace

TEST(KernelVariant, FunctionNameDropsScopeTemplateArgumentsAndParameters) {
  using twell::kernel_function_name;
  EXPECT_EQ(kernel_function_name("void twell::cuda::(anonymous namespace)::twell_up_down_kernel<true, false, "
                                 "(int)256>(twell::cuda::(anonymous namespace)::UpDownParams)"),
            "twell_up_down_kernel");
  EXPECT_EQ(kernel_function_name("void twell_gate_pack_sm90_kernel<8, 2>(CUtensorMap, CUtensorMap, "
                                 "CUtensorMap, twell::cuda::GatePackArgs)"),
            "twell_gate_pack_sm90_kernel");
  EXPECT_EQ(kernel_function_name("void ns::f<cute::tuple<int, cute::C<2>>, 128>(Params)"), "f");
  EXPECT_EQ(kernel_function_name("void move_rows_kernel(const __nv_bfloat16 *, int)"), "move_rows_kernel");
  EXPECT_EQ(kernel_function_name("twell_gate_pack<128, 8>"), "twell_gate_pack");
  // Not C++ signatures: unchanged.
  EXPECT_EQ(kernel_function_name("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN"),
            "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN");
  EXPECT_EQ(kernel_function_name("cpu:up_down"), "cpu:up_down");
  EXPECT_EQ(kernel_function_name(""), "");
  // Unbalanced brackets: the name whole rather than a guess.
  EXPECT_EQ(kernel_function_name("f>"), "f>");
  EXPECT_EQ(kernel_function_name("(Params)"), "(Params)");
}

TEST(KernelVariant, OurKernelsAreFoundByFunctionNameNotBySubstring) {
  const auto* cta = twell::find_kernel_variant(
      kVariants, record_of("void twell::cuda::twell_up_down_kernel<true, false, (int)256>(P)", "up_down"));
  ASSERT_NE(cta, nullptr);
  EXPECT_EQ(cta->description, "one CTA per token");
  const auto* warp = twell::find_kernel_variant(
      kVariants, record_of("void twell::cuda::twell_up_down_warp_kernel<true>(P)", "up_down"));
  ASSERT_NE(warp, nullptr);
  EXPECT_EQ(warp->description, "one warp per token");
  // Our kernel under another op (the overflow path reuses dense kernels): still found by name.
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("void twell_up_down_kernel<true>(P)", "other")),
            cta);
  // The same kernel described under the op it was tagged with.
  const auto* overflow = twell::find_kernel_variant(
      kVariants, record_of("void twell_up_down_kernel<true>(P)", "overflow_sparse"));
  ASSERT_NE(overflow, nullptr);
  EXPECT_EQ(overflow->description, "the overflowing rows");
  // A kernel of ours that the list does not describe.
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("void rms_norm_kernel(P)", "up_down")), nullptr);
}

TEST(KernelVariant, LibraryKernelsAreFoundByTheirOp) {
  const auto* gemm =
      twell::find_kernel_variant(kVariants, record_of("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "gate_up"));
  ASSERT_NE(gemm, nullptr);
  EXPECT_TRUE(gemm->library);
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("nvjet_tst_64x8", "attention")), nullptr);
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("nvjet_tst_64x8", "")), nullptr);
}

TEST(KernelVariant, CpuStagesMatchAndRegionsAndCopiesDoNot) {
  EXPECT_NE(twell::find_kernel_variant(kVariants, record_of("cpu:up_down", "up_down", "cpu")), nullptr);
  // A CUDA-event region spans several kernels of its op: no single variant produced it.
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("gate_up", "gate_up", "region")), nullptr);
  EXPECT_EQ(twell::find_kernel_variant(kVariants, record_of("memcpy HtoD", "gate_up", "memcpy")), nullptr);
  EXPECT_EQ(twell::find_kernel_variant({}, record_of("cpu:up_down", "up_down", "cpu")), nullptr);
}

TEST(KernelVariant, TheCpuBackendDescribesEveryStageItTimes) {
  const auto variants = twell::make_cpu_backend(1)->kernel_variants();
  for (const char* op : {"gate_up", "down", "gate_pack", "up_down", "overflow_dense"}) {
    const auto* variant =
        twell::find_kernel_variant(variants, record_of(std::string("cpu:") + op, op, "cpu"));
    ASSERT_NE(variant, nullptr) << op;
    EXPECT_EQ(variant->op, op);
    EXPECT_FALSE(variant->description.empty()) << op;
  }
}

TEST(KernelVariant, TheHoverLineNamesTheVariantOrIsEmpty) {
  twell::Report report;
  report.kernel_variants = kVariants;
  EXPECT_EQ(twell::views::kernel_variant_line(
                report, record_of("void twell_up_down_warp_kernel<true>(P)", "up_down")),
            "twell_up_down_warp_kernel (sm_80+): one warp per token");
  EXPECT_EQ(twell::views::kernel_variant_line(report, record_of("void rms_norm_kernel(P)", "attention")), "");
  EXPECT_EQ(twell::views::kernel_variant_line(twell::Report{}, record_of("cpu:up_down", "up_down", "cpu")),
            "");
}
