// SPDX-License-Identifier: GPL-3.0-or-later
// Every report the session writes validates against resources/schema/report.schema.json, and
// the schema declares every field the writer writes (so the two cannot drift apart silently).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fake_backend.hpp"
#include "json_schema_subset.hpp"
#include "report_fixture.hpp"
#include "test_support.hpp"
#include "twell/report_io.hpp"

namespace {

using nlohmann::json;
using namespace twell::test::fake;

const json& report_schema() {
  static const json schema = json::parse(twell::test::read_file(std::filesystem::path(TWELLSCOPE_SOURCE_DIR) /
                                                                "resources/schema/report.schema.json"));
  return schema;
}

void expect_valid(const twell::Report& report, const std::string& what) {
  const json document = json::parse(twell::report_to_json_text(report));
  const auto problems = twell::test::validate_against_schema(report_schema(), document, true);
  EXPECT_TRUE(problems.empty()) << what << ": " << problems.size()
                                << " problems, first: " << problems.front();
}

}  // namespace

TEST(ReportSchema, IsDraft202012WithTheReportsIdAndVersion) {
  const json& schema = report_schema();
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema["properties"]["schema"]["const"], twell::kReportSchemaId);
  EXPECT_EQ(schema["properties"]["schemaVersion"]["pattern"],
            "^" + std::to_string(twell::kReportSchemaMajor) + "\\.[0-9]+(\\.[0-9]+)?$");
}

TEST(ReportSchema, EverySessionConfigurationWritesAValidReport) {
  struct Variant {
    std::string name;
    std::function<void(SessionFixture&)> change;
  };
  const std::vector<Variant> variants = {
      {"default", [](SessionFixture&) {}},
      {"twell only, no end to end",
       [](SessionFixture& f) {
         f.config.paths = {"twell"};
         f.config.end_to_end = false;
       }},
      {"selected layers at C=2",
       [](SessionFixture& f) {
         f.config.layers = {1};
         f.config.compression = 2;
       }},
      {"cpu device",
       [](SessionFixture& f) { f.backend.device_info = {"cpu", "CPU", "", 2, 0, "", "", "cpu-reference"}; }},
      {"with the dispatch's break-even",
       [](SessionFixture& f) {
         f.backend.break_even = twell::FfnBreakEven{0.07, true, "scripted"};
       }},
      {"with a break-even set for the run", [](SessionFixture& f) { f.config.dispatch_break_even = 0.065; }},
  };
  for (const auto& variant : variants) {
    SessionFixture f;
    variant.change(f);
    expect_valid(f.run(), variant.name);
  }
  SessionFixture region(ScriptedTracer::Mode::Region, "no CUPTI");
  expect_valid(region.run(), "region tracer");
}

TEST(ReportSchema, SyntheticReportsWithNullMeasurementsAreValid) {
  twell::Report report = twell::test::make_synthetic_report();
  expect_valid(report, "synthetic");
  report.layers[0].twell_vs_dense->cosine = std::nan("");
  report.layers[1].twell_vs_dense.reset();
  report.model.config.rope_scaling.reset();
  expect_valid(report, "with nulls");
}

TEST(ReportSchema, ValidatorCatchesWhatTheSchemaForbids) {
  json document = twell::report_to_json(twell::test::make_synthetic_report());
  ASSERT_TRUE(twell::test::validate_against_schema(report_schema(), document, true).empty());

  json missing = document;
  missing["layers"][0]["sparsity"].erase("tileMax");
  EXPECT_EQ(twell::test::validate_against_schema(report_schema(), missing).at(0),
            "$.layers[0].sparsity: missing required property \"tileMax\"");

  json mistyped = document;
  mistyped["config"]["compression"] = 3;
  EXPECT_EQ(twell::test::validate_against_schema(report_schema(), mistyped).size(), 1u);

  json negative = document;
  negative["timeline"][0]["startNs"] = -5;
  EXPECT_EQ(twell::test::validate_against_schema(report_schema(), negative).size(), 1u);

  for (const double outside : {0.0, 1.0}) {
    json break_even = document;
    break_even["config"]["dispatchBreakEven"] = outside;
    EXPECT_EQ(twell::test::validate_against_schema(report_schema(), break_even).size(), 1u) << outside;
  }
  json inside = document;
  inside["config"]["dispatchBreakEven"] = 0.013;
  EXPECT_TRUE(twell::test::validate_against_schema(report_schema(), inside, true).empty());

  json future = document;
  future["schemaVersion"] = "2.0";
  EXPECT_EQ(twell::test::validate_against_schema(report_schema(), future).size(), 1u);

  json extra = document;
  extra["layers"][0]["undeclared"] = 1;
  EXPECT_TRUE(twell::test::validate_against_schema(report_schema(), extra).empty());
  EXPECT_EQ(twell::test::validate_against_schema(report_schema(), extra, true).size(), 1u);
}
