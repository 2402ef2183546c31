// SPDX-License-Identifier: GPL-3.0-or-later
// The report's JSON form: exact round trips, a golden file that pins the format, and malformed
// reports rejected with errors that name the place and the problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "report_fixture.hpp"
#include "test_support.hpp"
#include "twell/atomic_file.hpp"
#include "twell/error.hpp"
#include "twell/report_io.hpp"

namespace {

using nlohmann::json;
using twell::Error;

const std::vector<std::string> kAwkwardKernelNames = {
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int>, 128>>(Params)",
    "kernel \"quoted\", with commas, a back\\slash and a tab\there",
    "line\nbreak and a control \x01 character",
    "unicode: 核函数 ✓ é ∑ 🚀",
    "",
};

twell::Report awkward_report() {
  twell::test::SyntheticReportShape shape;
  shape.kernel_names = kAwkwardKernelNames;
  twell::Report report = twell::test::make_synthetic_report(shape);
  report.warnings.push_back("a warning with \"quotes\" and ünïcödé");
  report.model.source = "/data/models/with space, comma and \"quote\"";
  return report;
}

twell::test::SyntheticReportShape golden_shape() {
  twell::test::SyntheticReportShape shape;
  shape.layers = 2;
  shape.neurons = 256;
  shape.tokens = 8;
  shape.map = {4, 8};
  shape.kernel_names = {"twell_gate_pack<128, 8>", "void gemm<\"q\", ü>"};
  return shape;
}

twell::Report golden_11_report() {
  twell::Report report = twell::test::make_synthetic_report(golden_shape());
  report.dispatch_break_even = twell::FfnBreakEven{
      0.0105, true, "NVIDIA H200, D 2048, N 5632, C 8, M 131072 (bench_ffn, H200, 2026-12-04)"};
  return report;
}

// The golden report carries every optional section and field the writer knows.
twell::Report golden_report() {
  twell::Report report = golden_11_report();
  report.config.dispatch_break_even = 0.013;
  report.dispatch_break_even = twell::FfnBreakEven{0.013, false, "set for this run"};
  const twell::EndToEndPath& twell_forward = report.end_to_end.at(1);
  report.end_to_end.push_back(
      {twell::kDispatchForwardPath, twell_forward.forward, twell_forward.tokens_per_ms});
  report.config.twell_kernels = {"sm90", "auto", "sparse"};
  for (twell::EndToEndPath& forward : report.end_to_end) {
    twell::TimingStat occupied = forward.forward;
    occupied.median_us *= 0.75, occupied.min_us *= 0.75, occupied.max_us *= 0.875;
    forward.occupied = occupied;
  }
  return report;
}

/// The golden report as a writer before 1.5 wrote it: no occupied time in the forwards.
twell::Report golden_report_before_occupied() {
  twell::Report report = golden_report();
  for (twell::EndToEndPath& forward : report.end_to_end) forward.occupied.reset();
  return report;
}

const std::filesystem::path kGoldenPath =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.5.json";
// Written by 1.4 writers (before the forwards' occupied time).
const std::filesystem::path kGolden14Path =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.4.json";
// Written by 1.3 writers (before config.twellKernels).
const std::filesystem::path kGolden13Path =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.3.json";
// Written by 1.2 writers (before the kernel variants).
const std::filesystem::path kGolden12Path =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.2.json";
// Written by 1.1 writers (before the dispatch forward and a configured break-even).
const std::filesystem::path kGolden11Path =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.1.json";
// Written by 1.0 writers (before the dispatch section); readers of 1.x keep reading it.
const std::filesystem::path kGolden10Path =
    std::filesystem::path(TWELLSCOPE_TEST_DATA_DIR) / "reports" / "golden-1.0.json";

/// The message of the twell::Error that parsing `text` throws, or "" when it parses.
std::string parse_error(const std::string& text, Error::Kind expected_kind = Error::Kind::InvalidInput) {
  try {
    twell::parse_report(text, "r.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), expected_kind) << e.what();
    return e.what();
  }
  return "";
}

std::string document_error(const json& document, Error::Kind expected_kind = Error::Kind::InvalidInput) {
  return parse_error(document.dump(), expected_kind);
}

json good_document() {
  return twell::report_to_json(twell::test::make_synthetic_report());
}

}  // namespace

TEST(ReportIo, RoundTripKeepsEveryFieldWithAwkwardKernelNames) {
  const twell::Report original = awkward_report();
  const std::string text = twell::report_to_json_text(original);
  const twell::Report parsed = twell::parse_report(text, "memory");
  EXPECT_EQ(parsed, original);
  EXPECT_EQ(parsed.timeline.at(2).name, kAwkwardKernelNames[2]);
  EXPECT_EQ(twell::report_to_json_text(parsed), text);
}

TEST(ReportIo, MapCellsOfEveryLengthSurviveBase64) {
  for (std::uint32_t cols = 1; cols <= 7; ++cols) {
    twell::Report report = twell::test::make_synthetic_report();
    auto& map = report.layers[0].sparsity.map;
    map.rows = 1;
    map.cols = cols;
    map.cells.assign(cols, 0);
    for (std::uint32_t c = 0; c < cols; ++c) map.cells[c] = static_cast<std::uint8_t>(250 + c);
    EXPECT_EQ(twell::parse_report(twell::report_to_json_text(report), "m").layers[0].sparsity.map, map)
        << cols;
  }
}

TEST(ReportIo, NonFiniteMeasurementsAreWrittenAsNullAndReadBackAsNaN) {
  twell::Report report = twell::test::make_synthetic_report();
  report.layers[1].twell_vs_dense->cosine = std::nan("");
  report.end_to_end[0].tokens_per_ms = INFINITY;
  const std::string text = twell::report_to_json_text(report);
  EXPECT_EQ(json::parse(text)["layers"][1]["twellVsDense"]["cosine"], nullptr);
  const twell::Report parsed = twell::parse_report(text, "nan");
  EXPECT_TRUE(std::isnan(parsed.layers[1].twell_vs_dense->cosine));
  EXPECT_TRUE(std::isnan(parsed.end_to_end[0].tokens_per_ms));
}

TEST(ReportIo, GoldenFileReadsAsTheFixtureAndIsWrittenByteForByte) {
  const twell::Report expected = golden_report();
  const std::string written = twell::report_to_json_text(expected);
  if (std::getenv("TWELLSCOPE_UPDATE_GOLDEN")) twell::write_file_atomically(kGoldenPath, written);
  const std::string golden = twell::test::read_file(kGoldenPath);
  EXPECT_EQ(twell::parse_report(golden, kGoldenPath.string()), expected);
  EXPECT_EQ(written, golden)
      << "the report format changed: if on purpose, bump kReportSchemaMinor (additions) or "
         "kReportSchemaMajor, update the schema, and regenerate the golden file with "
         "TWELLSCOPE_UPDATE_GOLDEN=1";
}

TEST(ReportIo, AVersion10ReportStillReadsWithoutADispatchSection) {
  twell::Report expected = twell::test::make_synthetic_report(golden_shape());
  expected.schema_minor = 0;
  expected.kernel_variants.clear();
  const twell::Report parsed =
      twell::parse_report(twell::test::read_file(kGolden10Path), kGolden10Path.string());
  EXPECT_EQ(parsed, expected);
  EXPECT_FALSE(parsed.dispatch_break_even);
}

TEST(ReportIo, AVersion14ReportReadsWithoutOccupiedTime) {
  twell::Report expected = golden_report_before_occupied();
  expected.schema_minor = 4;
  const twell::Report parsed =
      twell::parse_report(twell::test::read_file(kGolden14Path), kGolden14Path.string());
  EXPECT_EQ(parsed, expected);
  for (const auto& forward : parsed.end_to_end) EXPECT_FALSE(forward.occupied_fraction()) << forward.path;
}

TEST(ReportIo, AVersion13ReportReadsAsAutoKernels) {
  twell::Report expected = golden_report_before_occupied();
  expected.schema_minor = 3;
  expected.config.twell_kernels = {};
  const twell::Report parsed =
      twell::parse_report(twell::test::read_file(kGolden13Path), kGolden13Path.string());
  EXPECT_EQ(parsed, expected);
  EXPECT_TRUE(parsed.config.twell_kernels.is_auto());
}

TEST(ReportIo, AVersion11ReportStillReads) {
  twell::Report expected = golden_11_report();
  expected.schema_minor = 1;
  expected.kernel_variants.clear();
  const twell::Report parsed =
      twell::parse_report(twell::test::read_file(kGolden11Path), kGolden11Path.string());
  EXPECT_EQ(parsed, expected);
  EXPECT_FALSE(parsed.config.dispatch_break_even);
}

TEST(ReportIo, AVersion12ReportStillReadsWithoutKernelVariants) {
  twell::Report expected = golden_report_before_occupied();
  expected.schema_minor = 2;
  expected.kernel_variants.clear();
  expected.config.twell_kernels = {};
  const twell::Report parsed =
      twell::parse_report(twell::test::read_file(kGolden12Path), kGolden12Path.string());
  EXPECT_EQ(parsed, expected);
  EXPECT_TRUE(parsed.kernel_variants.empty());
}

TEST(ReportIo, AKernelVariantWithoutItsDescriptionIsRejected) {
  json document = good_document();
  document["kernelVariants"][0].erase("description");
  const std::string message = document_error(document);
  EXPECT_NE(message.find("kernelVariants"), std::string::npos) << message;
  EXPECT_NE(message.find("description"), std::string::npos) << message;
}

TEST(ReportIo, AConfiguredBreakEvenOutsideZeroToOneIsRejected) {
  json document = twell::report_to_json(golden_report());
  ASSERT_TRUE(document["config"].contains("dispatchBreakEven"));
  for (const double bad : {0.0, 1.0, -0.01}) {
    document["config"]["dispatchBreakEven"] = bad;
    const std::string message = document_error(document);
    EXPECT_NE(message.find("config.dispatchBreakEven"), std::string::npos) << message;
    EXPECT_NE(message.find("a break-even density is a fraction in (0, 1)"), std::string::npos) << message;
  }
}

TEST(ReportIo, ABreakEvenOutsideZeroToOneIsRejected) {
  json document = twell::report_to_json(golden_report());
  ASSERT_TRUE(document.contains("dispatch"));
  EXPECT_EQ(twell::report_from_json(document, "ok").dispatch_break_even, golden_report().dispatch_break_even);
  document["dispatch"]["breakEvenDensity"] = 1.5;
  const std::string message = document_error(document);
  EXPECT_NE(message.find("dispatch.breakEvenDensity"), std::string::npos) << message;
  EXPECT_NE(message.find("a density is a fraction in [0, 1]"), std::string::npos) << message;
  document["dispatch"]["breakEvenDensity"] = 0.01;
  document["dispatch"].erase("basis");
  EXPECT_NE(document_error(document).find("basis"), std::string::npos);
}

TEST(ReportIo, SaveAndLoadThroughAFile) {
  twell::test::TempDir dir;
  const twell::Report report = awkward_report();
  twell::save_report(report, dir.path() / "report.json");
  EXPECT_EQ(twell::load_report(dir.path() / "report.json"), report);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename(), "report.json") << "temporary file left behind";
}

TEST(ReportIo, LoadingAMissingFileIsAnIoError) {
  twell::test::TempDir dir;
  try {
    twell::load_report(dir.path() / "absent.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Io);
    EXPECT_NE(std::string(e.what()).find("absent.json"), std::string::npos);
  }
}

TEST(ReportIo, EmptyAndNonJsonTextAreRejected) {
  EXPECT_NE(parse_error("").find("empty file"), std::string::npos);
  EXPECT_NE(parse_error("  \n").find("empty file"), std::string::npos);
  const std::string garbage = parse_error("this is not json");
  EXPECT_EQ(
      garbage.rfind("r.json: not valid JSON at byte 2: parse error at line 1, column 2: syntax error", 0), 0u)
      << garbage;
  EXPECT_NE(parse_error("[1, 2]").find("a report is a JSON object"), std::string::npos);
}

TEST(ReportIo, TruncatedReportSaysSo) {
  const std::string text = twell::report_to_json_text(twell::test::make_synthetic_report());
  for (std::size_t keep : {text.size() / 3, text.size() / 2, text.size() - 3}) {
    const std::string message = parse_error(text.substr(0, keep));
    EXPECT_NE(message.find("r.json: truncated"), std::string::npos) << keep << ": " << message;
  }
}

TEST(ReportIo, ForeignJsonIsNotAReport) {
  EXPECT_NE(
      document_error(json{{"traceEvents", json::array()}}).find("not a twellscope report (no \"schema\""),
      std::string::npos);
  json document = good_document();
  document["schema"] = "https://example.com/other";
  EXPECT_NE(document_error(document).find("$.schema: not a twellscope report"), std::string::npos);
}

TEST(ReportIo, WrongTypesNameTheJsonPath) {
  json document = good_document();
  document["layers"][1]["sparsity"]["density"] = "high";
  EXPECT_EQ(document_error(document),
            "r.json: $.layers[1].sparsity.density: expected a number, found a string");

  document = good_document();
  document["layers"][0]["paths"][1]["total"]["count"] = 2.5;
  EXPECT_EQ(document_error(document),
            "r.json: $.layers[0].paths[1].total.count: expected an integer, found a non-integer number");

  document = good_document();
  document["timeline"][3]["grid"] = json::array({1, 2});
  EXPECT_NE(document_error(document).find("$.timeline[3].grid: expected 3 integers"), std::string::npos);

  document = good_document();
  document["layers"][2]["sparsity"]["neuronFireCounts"][5] = -1;
  EXPECT_NE(
      document_error(document).find("$.layers[2].sparsity.neuronFireCounts[5]: integer -1 is out of range"),
      std::string::npos);

  document = good_document();
  document["config"]["paths"] = "dense";
  EXPECT_EQ(document_error(document), "r.json: $.config.paths: expected an array, found a string");

  document = good_document();
  document["config"]["twellKernels"] = "sm90/fastest";
  EXPECT_NE(document_error(document).find(
                "$.config.twellKernels: TwELL kernels: \"fastest\" is not an up/down kernel (one of auto, "
                "per_token_cta, balanced_cta, per_token_warp, union_sm90)"),
            std::string::npos)
      << document_error(document);

  document = good_document();
  document["tracer"]["clock"] = "wall";
  EXPECT_NE(document_error(document).find("$.tracer.clock: expected \"gpu\" or \"cpu\""), std::string::npos);
}

TEST(ReportIo, MissingFieldsNameTheObjectAndTheField) {
  json document = good_document();
  document["layers"][0]["paths"][1]["total"].erase("medianUs");
  EXPECT_EQ(document_error(document),
            "r.json: $.layers[0].paths[1].total: missing required field \"medianUs\"");
  document = good_document();
  document.erase("device");
  EXPECT_EQ(document_error(document), "r.json: $: missing required field \"device\"");
}

TEST(ReportIo, NewerMajorVersionIsRefusedAsUnsupported) {
  json document = good_document();
  document["schemaVersion"] = "2.0";
  const std::string message = document_error(document, Error::Kind::Unsupported);
  EXPECT_NE(message.find("version 2.0 is newer than this twellscope reads (1.x)"), std::string::npos)
      << message;
  document["schemaVersion"] = "one";
  EXPECT_NE(document_error(document).find("not a MAJOR.MINOR version"), std::string::npos);
}

TEST(ReportIo, NewerMinorVersionWithUnknownFieldsStillLoads) {
  json document = good_document();
  document["schemaVersion"] = "1.7";
  document["someFutureSection"] = {{"x", 1}};
  document["layers"][0]["futureLayerField"] = json::array({1, 2, 3});
  const twell::Report report = twell::report_from_json(document, "future");
  EXPECT_EQ(report.schema_major, 1);
  EXPECT_EQ(report.schema_minor, 7);
  EXPECT_EQ(report.layers.size(), 3u);
}

TEST(ReportIo, MissingRepeatedOrUnselectedLayersAreRejected) {
  json document = good_document();
  document["layers"].erase(1);
  EXPECT_EQ(document_error(document),
            "r.json: $.layers: layer 1 is missing (the report covers every layer of the model: 0, 1, 2)");

  document = good_document();
  std::swap(document["layers"][0], document["layers"][1]);
  EXPECT_NE(document_error(document).find("$.layers[1].index: layer 0 follows layer 1"), std::string::npos);

  document = good_document();
  document["config"]["layers"] = json::array({0, 2});
  EXPECT_NE(document_error(document).find("layer 1 not selected by the configuration (expected 0, 2)"),
            std::string::npos);
  document["layers"].erase(1);
  EXPECT_EQ(twell::report_from_json(document, "subset").layers.size(), 2u);

  document["config"]["layers"] = json::array({0, 9});
  EXPECT_NE(document_error(document).find("$.config.layers: selects layer 9, but the model has 3 layers"),
            std::string::npos);
}

TEST(ReportIo, DamagedMapCellsAreRejected) {
  json document = good_document();
  document["layers"][0]["sparsity"]["map"]["cells"] = "not base64!";
  EXPECT_NE(document_error(document).find("$.layers[0].sparsity.map.cells: not valid base64"),
            std::string::npos);
  document = good_document();
  document["layers"][0]["sparsity"]["map"]["rows"] = 17;
  EXPECT_NE(document_error(document).find("cells, but rows x cols is"), std::string::npos);
}

TEST(AtomicFile, ReplacesContentKeepsPermissionsAndLeavesNoTemporaryFile) {
  twell::test::TempDir dir;
  const auto path = dir.path() / "out.csv";
  twell::write_file_atomically(path, "first");
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  twell::write_file_atomically(path, "second, longer content");
  EXPECT_EQ(twell::test::read_file(path), "second, longer content");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(
      std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()),
      1);
}

TEST(AtomicFile, MissingDirectoryIsAnIoErrorNamingThePath) {
  twell::test::TempDir dir;
  try {
    twell::write_file_atomically(dir.path() / "no-such-dir" / "r.json", "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Io);
    EXPECT_NE(std::string(e.what()).find("no-such-dir/r.json"), std::string::npos) << e.what();
  }
}
