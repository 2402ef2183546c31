// SPDX-License-Identifier: GPL-3.0-or-later
// Inputs the fuzzers found: each must give a clear twell::Error, never an escaped library exception.
#include <gtest/gtest.h>

#include <string>

#include "twell/error.hpp"
#include "twell/report_io.hpp"

TEST(ReportReaderRegression, NumberPastDoubleRangeIsAnInvalidReportError) {
  try {
    (void)twell::parse_report(R"({"schema": 3E333})", "overflow.json");
    FAIL() << "a number past the range of double was accepted";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("overflow.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3E333"), std::string::npos) << e.what();
  }
}
