// SPDX-License-Identifier: GPL-3.0-or-later
// End to end through the twellscope-cli binary: profile the tiny preset on the CPU backend,
// export every format, compare two reports, and the exit codes of the failure paths.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "json_schema_subset.hpp"
#include "test_support.hpp"
#include "twell/model_generator.hpp"
#include "twell/report_io.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using twell::test::run_command;

std::string quoted(const fs::path& path) {
  std::string text(1, '\'');  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + string
  text += path.string();
  text += '\'';
  return text;
}

std::string cli(const std::string& arguments) {
  return std::string("'") + TWELLSCOPE_CLI_PATH + "' " + arguments;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find_first_of("\r\n"));
}

class CliProfile : public ::testing::Test {
 protected:
  // One tiny model and two reports for the whole suite: profiling is the slow part.
  static void SetUpTestSuite() {
    s_dir = new twell::test::TempDir("twellscope-cli-profile");
    twell::GeneratorOptions options;
    options.preset = "tiny";
    options.seed = 5;
    twell::generate_model(options, model());
    s_profile_a = new twell::test::CommandResult(run_command(
        cli("profile " + quoted(model()) + " --backend cpu --batch 1 --seq 32 --warmup 1 --reps 2 --out " +
            quoted(report_a()))));
    s_profile_b = new twell::test::CommandResult(
        run_command(cli("profile " + quoted(model()) +
                        " --backend cpu --batch 1 --seq 32 --warmup 0 --reps 1 -C 4 "
                        "--paths twell,dense --no-end-to-end --out " +
                        quoted(report_b()))));
  }
  static void TearDownTestSuite() {
    delete s_profile_a;
    delete s_profile_b;
    delete s_dir;
  }
  static fs::path dir() { return s_dir->path(); }
  static fs::path model() { return dir() / "tiny"; }
  static fs::path report_a() { return dir() / "a.json"; }
  static fs::path report_b() { return dir() / "b.json"; }

  static twell::test::TempDir* s_dir;
  static twell::test::CommandResult* s_profile_a;
  static twell::test::CommandResult* s_profile_b;
};
twell::test::TempDir* CliProfile::s_dir = nullptr;
twell::test::CommandResult* CliProfile::s_profile_a = nullptr;
twell::test::CommandResult* CliProfile::s_profile_b = nullptr;

}  // namespace

TEST_F(CliProfile, ProfileOnTheCpuBackendWritesAValidReportAndSaysItIsCpu) {
  ASSERT_EQ(s_profile_a->exit_code, 0) << s_profile_a->output;
  EXPECT_NE(s_profile_a->output.find("running the CPU backend"), std::string::npos) << s_profile_a->output;
  EXPECT_NE(s_profile_a->output.find("Wrote " + report_a().string()), std::string::npos);
  const twell::Report report = twell::load_report(report_a());
  EXPECT_EQ(report.device.backend, "cpu");
  EXPECT_EQ(report.tracer.clock, "cpu");
  EXPECT_EQ(report.layers.size(), std::size_t(report.model.config.num_hidden_layers));
  EXPECT_EQ(report.end_to_end.size(), 2u);
  bool cpu_warning = false;
  for (const auto& warning : report.warnings) cpu_warning |= warning.find("CPU timings") != std::string::npos;
  EXPECT_TRUE(cpu_warning);
  for (const auto& layer : report.layers) {
    ASSERT_TRUE(layer.twell_vs_dense);
    EXPECT_LT(layer.twell_vs_dense->rel_frobenius, 1e-4) << "layer " << layer.index;
    EXPECT_GT(layer.find_path("dense")->total.median_us, 0.0);
    EXPECT_EQ(layer.find_path("twell")->total.count, 2u);
  }

  const json schema = json::parse(
      twell::test::read_file(fs::path(TWELLSCOPE_SOURCE_DIR) / "resources/schema/report.schema.json"));
  for (const auto& path : {report_a(), report_b()}) {
    const auto problems =
        twell::test::validate_against_schema(schema, json::parse(twell::test::read_file(path)), true);
    EXPECT_TRUE(problems.empty()) << path << ": " << problems.front();
  }
}

TEST_F(CliProfile, EveryFfnStageOfTheTimelineIsDescribedInTheReportAndItsMarkdown) {
  ASSERT_EQ(s_profile_a->exit_code, 0) << s_profile_a->output;
  const twell::Report report = twell::load_report(report_a());
  ASSERT_FALSE(report.kernel_variants.empty());
  std::set<std::string> ops_seen;
  for (const twell::KernelRecord& record : report.timeline) {
    static const std::set<std::string> kFfnOps = {"gate_up", "down", "gate_pack", "up_down",
                                                  "overflow_dense"};
    if (!kFfnOps.count(record.tag.op)) continue;  // embedding, attention, statistics...
    const twell::KernelVariant* variant = twell::find_kernel_variant(report.kernel_variants, record);
    ASSERT_NE(variant, nullptr) << record.name << " (" << record.tag.op << ")";
    EXPECT_EQ(variant->op, record.tag.op) << record.name;
    ops_seen.insert(record.tag.op);
  }
  EXPECT_TRUE(ops_seen.count("up_down") && ops_seen.count("gate_pack") && ops_seen.count("gate_up"));

  const fs::path markdown = dir() / "variants.md";
  const auto exported =
      run_command(cli("export " + quoted(report_a()) + " --format markdown --out " + quoted(markdown)));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string text = twell::test::read_file(markdown);
  EXPECT_NE(text.find("## FFN kernels"), std::string::npos) << text;
  EXPECT_NE(text.find("| cpu:up_down | twell | up_down |"), std::string::npos) << text;
}

TEST_F(CliProfile, OptionsReachTheReport) {
  ASSERT_EQ(s_profile_b->exit_code, 0) << s_profile_b->output;
  const twell::Report report = twell::load_report(report_b());
  EXPECT_EQ(report.config.compression, 4u);
  EXPECT_EQ(report.config.paths, (std::vector<std::string>{"twell", "dense"}));
  EXPECT_EQ(report.config.repetitions, 1u);
  EXPECT_EQ(report.config.sequence, 32u);
  EXPECT_TRUE(report.end_to_end.empty());

  const fs::path tokens = dir() / "tokens.txt";
  twell::test::write_file(tokens, "1 2 3 4 5 6 7 8\n8 7 6 5 4 3 2 1\n");
  const fs::path out = dir() / "tokens.json";
  const auto result =
      run_command(cli("profile " + quoted(model()) + " --backend cpu --tokens-file " + quoted(tokens) +
                      " --layers 1 --reps 1 --warmup 0 --no-end-to-end -q --out " + quoted(out)));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const twell::Report from_file = twell::load_report(out);
  EXPECT_EQ(from_file.config.batch, 2u);
  EXPECT_EQ(from_file.config.sequence, 8u);
  EXPECT_NE(from_file.config.token_source.find("tokens.txt"), std::string::npos);
  ASSERT_EQ(from_file.layers.size(), 1u);
  EXPECT_EQ(from_file.layers[0].index, 1);

  // A break-even set for the run: the CPU backend has none of its own, so only then does the
  // dispatch forward run on it.
  const fs::path dispatched = dir() / "dispatched.json";
  const auto with_break_even = run_command(
      cli("profile " + quoted(model()) + " --backend cpu --batch 1 --seq 32 --layers 0 --reps 1 --warmup 0 " +
          "--dispatch-break-even 0.5 -q --out " + quoted(dispatched)));
  ASSERT_EQ(with_break_even.exit_code, 0) << with_break_even.output;
  const twell::Report dispatch_report = twell::load_report(dispatched);
  EXPECT_EQ(dispatch_report.config.dispatch_break_even, 0.5);
  ASSERT_EQ(dispatch_report.end_to_end.size(), 3u);
  EXPECT_EQ(dispatch_report.end_to_end[2].path, twell::kDispatchForwardPath);
  EXPECT_NE(with_break_even.output.find("per-layer dispatch/dense "), std::string::npos)
      << with_break_even.output;
  EXPECT_NE(with_break_even.output.find("below the break-even of 50.00 % (set for this run)"),
            std::string::npos)
      << with_break_even.output;

  const auto outside =
      run_command(cli("profile " + quoted(model()) + " --backend cpu --dispatch-break-even 1.5 " + "--out " +
                      quoted(dir() / "never.json")));
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_NE(outside.output.find("--dispatch-break-even"), std::string::npos) << outside.output;
  EXPECT_FALSE(fs::exists(dir() / "never.json"));
}

TEST_F(CliProfile, ExportsEveryFormat) {
  ASSERT_EQ(s_profile_a->exit_code, 0);
  const twell::Report report = twell::load_report(report_a());
  auto export_to = [&](const std::string& format) {
    const fs::path out = dir() / ("export." + format);
    const auto result =
        run_command(cli("export " + quoted(report_a()) + " --format " + format + " --out " + quoted(out)));
    EXPECT_EQ(result.exit_code, 0) << format << ": " << result.output;
    return twell::test::read_file(out);
  };
  const std::string layers = export_to("csv");
  EXPECT_EQ(
      first_line(layers).rfind("layer,density,nnz_mean,nnz_p99,nnz_max,dead_neurons,tile_max,overflow_rows,"
                               "dense_us,twell_us,speedup,rel_error",
                               0),
      0u);
  std::size_t lines = 0;
  for (std::size_t pos = 0; (pos = layers.find("\r\n", pos)) != std::string::npos; pos += 2) ++lines;
  EXPECT_EQ(lines, report.layers.size() + 1);
  EXPECT_EQ(first_line(export_to("kernels-csv")),
            "layer,path,op,kernel,count,median_us,min_us,max_us,timing_clock");
  const json trace = json::parse(export_to("trace"));
  EXPECT_GE(trace["traceEvents"].size(), report.timeline.size());
  EXPECT_EQ(export_to("markdown").rfind("# twellscope report: ", 0), 0u);

  const auto to_stdout = run_command(cli("export " + quoted(report_a()) + " --format markdown --out -"));
  EXPECT_EQ(to_stdout.exit_code, 0);
  EXPECT_NE(to_stdout.output.find("## Layers"), std::string::npos);
}

TEST_F(CliProfile, ComparesTwoReports) {
  ASSERT_EQ(s_profile_a->exit_code, 0);
  ASSERT_EQ(s_profile_b->exit_code, 0);
  const auto text = run_command(cli("compare " + quoted(report_a()) + " " + quoted(report_b())));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("TwELL layer time (geometric mean): "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("caveat: compression factor differs: C=8 (A) vs C=4 (B)"), std::string::npos);
  EXPECT_NE(text.output.find("\nLayers\nlayer"), std::string::npos);

  const fs::path out = dir() / "comparison.md";
  const auto markdown =
      run_command(cli("compare " + quoted(report_a()) + " " + quoted(report_b()) + " --out " + quoted(out)));
  ASSERT_EQ(markdown.exit_code, 0) << markdown.output;
  EXPECT_EQ(twell::test::read_file(out).rfind("# twellscope comparison", 0), 0u);
}

TEST_F(CliProfile, BadReportsFailWithTheDocumentedExitCodes) {
  ASSERT_EQ(s_profile_a->exit_code, 0);
  const std::string good = twell::test::read_file(report_a());
  const fs::path truncated = dir() / "truncated.json";
  twell::test::write_file(truncated, good.substr(0, good.size() / 2));
  auto result =
      run_command(cli("export " + quoted(truncated) + " --format csv --out " + quoted(dir() / "x.csv")));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("truncated"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir() / "x.csv"));

  result = run_command(cli("compare " + quoted(report_a()) + " " + quoted(truncated)));
  EXPECT_EQ(result.exit_code, 3) << result.output;

  json future = json::parse(good);
  future["schemaVersion"] = "2.0";
  const fs::path newer = dir() / "newer.json";
  twell::test::write_file(newer, future.dump());
  result = run_command(cli("export " + quoted(newer) + " --format markdown --out -"));
  EXPECT_EQ(result.exit_code, 4) << result.output;
  EXPECT_NE(result.output.find("newer than this twellscope reads"), std::string::npos);

  result = run_command(cli("export " + quoted(dir() / "absent.json") + " --format csv --out -"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  result = run_command(cli("export " + quoted(report_a()) + " --format pdf --out -"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

TEST_F(CliProfile, ProfileFailuresWriteNoReport) {
  const fs::path out = dir() / "never.json";
  auto expect_failure = [&](const std::string& arguments, int exit_code, const std::string& needle) {
    const auto result =
        run_command(cli("profile " + arguments + " --backend cpu --seq 8 --out " + quoted(out)));
    EXPECT_EQ(result.exit_code, exit_code) << arguments << ": " << result.output;
    EXPECT_NE(result.output.find(needle), std::string::npos) << arguments << ": " << result.output;
    EXPECT_FALSE(fs::exists(out)) << arguments;
  };
  expect_failure("", 3, "either a checkpoint directory or --demo");
  expect_failure(quoted(model()) + " --demo", 3, "exactly one");
  expect_failure(quoted(dir() / "no-such-model"), 3, "no-such-model");
  expect_failure(quoted(model()) + " --layers 7", 3, "layer 7 does not exist");
  expect_failure(quoted(model()) + " --layers 1-x", 3, "--layers");
  expect_failure(quoted(model()) + " -C 3", 2, "--compression: 3 not in {8,4,2}");
  expect_failure(quoted(model()) + " --paths dense,sparse", 2, "--paths");
  expect_failure(quoted(model()) + " --twell-kernels sm90/fast", 2, "\"fast\" is not an up/down kernel");
  expect_failure(quoted(model()) + " --twell-kernels auto/balanced_cta", 4, "one kernel per FFN stage");

  const auto missing_dir = run_command(
      cli("profile " + quoted(model()) + " --backend cpu --out " + quoted(dir() / "no-dir" / "r.json")));
  EXPECT_EQ(missing_dir.exit_code, 5) << missing_dir.output;
}

TEST_F(CliProfile, EverySubcommandHasHelpWithExitCodes) {
  for (const char* command : {"profile", "export", "compare"}) {
    const auto result = run_command(cli(std::string(command) + " --help"));
    EXPECT_EQ(result.exit_code, 0) << command;
    EXPECT_NE(result.output.find("Exit codes: 0 success"), std::string::npos) << command;
  }
}

TEST_F(CliProfile, CtrlCCancelsWithExitCode130AndNoReport) {
  const fs::path out = dir() / "interrupted.json";
  // The handler is installed once the model is loaded; a signal that lands earlier kills the
  // process the default way, so that case is retried with a longer head start.
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      execl(TWELLSCOPE_CLI_PATH, TWELLSCOPE_CLI_PATH, "profile", model().c_str(), "--backend", "cpu",
            "--batch", "4", "--seq", "128", "--reps", "100000", "--out", out.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(400 * attempt));
    ASSERT_EQ(kill(child, SIGINT), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_FALSE(fs::exists(out));
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) continue;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 130);
    return;
  }
  FAIL() << "the profile never got far enough to install its Ctrl-C handler";
}
