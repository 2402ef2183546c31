// SPDX-License-Identifier: GPL-3.0-or-later
// The TwELL kernels a run asks for: "gate[/up_down[/overflow]]" parsed part by part, unknown names
// refused with the names each part takes, and the canonical text reading back as the same request.
#include <gtest/gtest.h>

#include <string>

#include "twell/error.hpp"
#include "twell/twell_kernel_request.hpp"

namespace {

using twell::parse_twell_kernel_request;
using twell::TwellKernelRequest;

std::string parse_error(const std::string& text) {
  try {
    parse_twell_kernel_request(text);
  } catch (const twell::Error& error) {
    EXPECT_EQ(error.kind(), twell::Error::Kind::InvalidInput);
    return error.what();
  }
  return "";
}

}  // namespace

TEST(TwellKernelRequest, PartsLeftOutAreAuto) {
  EXPECT_TRUE(parse_twell_kernel_request("auto").is_auto());
  EXPECT_EQ(parse_twell_kernel_request("sm90"), (TwellKernelRequest{"sm90", "auto", "auto"}));
  EXPECT_EQ(parse_twell_kernel_request("cublas_pack/per_token_warp"),
            (TwellKernelRequest{"cublas_pack", "per_token_warp", "auto"}));
  EXPECT_EQ(parse_twell_kernel_request("auto/balanced_cta/sparse"),
            (TwellKernelRequest{"auto", "balanced_cta", "sparse"}));
  EXPECT_EQ(parse_twell_kernel_request("portable/per_token_cta/dense"),
            (TwellKernelRequest{"portable", "per_token_cta", "dense"}));
  EXPECT_EQ(parse_twell_kernel_request("cublas_pack/auto/unbounded"),
            (TwellKernelRequest{"cublas_pack", "auto", "unbounded"}));
}

TEST(TwellKernelRequest, TheCanonicalTextReadsBackTheSame) {
  EXPECT_EQ(twell::to_string(TwellKernelRequest{}), "auto");
  EXPECT_EQ(twell::to_string(parse_twell_kernel_request("auto/auto/auto")), "auto");
  for (const char* text :
       {"sm90/auto/auto", "auto/balanced_cta/auto", "auto/auto/sparse", "cublas_pack/per_token_cta/dense"}) {
    EXPECT_EQ(twell::to_string(parse_twell_kernel_request(text)), text);
    EXPECT_EQ(parse_twell_kernel_request(twell::to_string(parse_twell_kernel_request(text))),
              parse_twell_kernel_request(text));
  }
}

TEST(TwellKernelRequest, UnknownNamesAndExtraPartsAreRefusedWithTheChoices) {
  EXPECT_EQ(parse_error("sm100"),
            "TwELL kernels: \"sm100\" is not a gate kernel (one of auto, portable, sm90, cublas_pack)");
  EXPECT_EQ(parse_error("sm90/cta"),
            "TwELL kernels: \"cta\" is not an up/down kernel (one of auto, per_token_cta, balanced_cta, "
            "per_token_warp, union_sm90)");
  EXPECT_EQ(parse_error("sm90/auto/drop"),
            "TwELL kernels: \"drop\" is not a route for overflowing rows (one of auto, dense, sparse, "
            "unbounded)");
  EXPECT_NE(parse_error("sm90/auto/auto/auto").find("more than three parts"), std::string::npos);
  EXPECT_NE(parse_error("").find("\"\" is not a gate kernel"), std::string::npos);
  EXPECT_NE(parse_error("sm90/").find("\"\" is not an up/down kernel"), std::string::npos);
  EXPECT_NE(parse_error("SM90").find("is not a gate kernel"), std::string::npos);  // names are exact
}

TEST(TwellKernelRequest, EveryPartOffersAutoFirst) {
  for (const auto names : {twell::twell_gate_kernel_names(), twell::twell_up_down_kernel_names(),
                           twell::twell_overflow_route_names()}) {
    ASSERT_GE(names.size(), 3u);
    EXPECT_EQ(names.front(), "auto");
  }
}
