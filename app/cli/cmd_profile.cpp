// SPDX-License-Identifier: GPL-3.0-or-later
// `twellscope-cli profile (MODEL_DIR | --demo) ... --out REPORT.json`: one profiling session
// (core/session.hpp) written as a JSON report.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "runtime.hpp"
#include "twell/checkpoint.hpp"
#include "twell/error.hpp"
#include "twell/model_generator.hpp"
#include "twell/report_io.hpp"
#include "twell/session.hpp"
#include "twell/tokens.hpp"
#include "twell/twell_kernel_request.hpp"

namespace twell::cli {
namespace {

struct ProfileArguments {
  std::string model_dir;
  bool demo = false;
  std::string tokens_file;
  std::uint32_t batch = 1, sequence = 256;
  std::uint64_t seed = 1;
  std::string activation;
  std::vector<std::string> paths{"dense", "twell"};
  std::uint32_t compression = 8;
  std::uint32_t warmup = 2, repetitions = 5;
  std::string backend = "auto";
  int device = 0;
  std::string layers;
  bool no_end_to_end = false;
  bool no_flush_l2 = false;
  bool highest_precision = false;
  std::string twell_kernels = "auto";
  std::optional<double> dispatch_break_even;
  std::uint32_t map_rows = 256, map_cols = 512;
  std::string out;
  bool quiet = false;
};

/// "0,2,5-7" -> {0, 2, 5, 6, 7}.
std::vector<int> parse_layer_list(const std::string& text) {
  auto invalid = [&](const std::string& why) {
    throw Error(Error::Kind::InvalidInput, "--layers \"" + text + "\": " + why + " (expected e.g. 0,2,5-7)");
  };
  auto number = [&](const std::string& item) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      invalid("\"" + item + "\" is not a layer number");
    if (item.size() > 6) invalid("layer " + item + " is out of range");
    return std::stoi(item);
  };
  std::vector<int> layers;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      layers.push_back(number(item));
    } else {
      const int first = number(item.substr(0, dash));
      const int last = number(item.substr(dash + 1));
      if (last < first) invalid("range " + item + " runs backwards");
      for (int layer = first; layer <= last; ++layer) layers.push_back(layer);
    }
    begin = end + 1;
  }
  return layers;
}

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

/// Ctrl-C cancels the session cleanly (no report written) instead of killing the process; a
/// second Ctrl-C then kills it as usual.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted.store(false);
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &m_previous);
  }
  ~InterruptGuard() { sigaction(SIGINT, &m_previous, nullptr); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction m_previous {};
};

/// A one-line bar redrawn in place; only used when stderr is a terminal.
class ProgressBar {
 public:
  void draw(const SessionProgress& p) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(p.fraction * kWidth + 0.5);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(kWidth - filled), '-');
    const char* stage = p.stage == "layers"       ? "layers"
                        : p.stage == "end_to_end" ? "end-to-end forwards"
                                                  : "done";
    char left[32] = "";
    if (p.seconds_left && p.fraction < 1.0)
      std::snprintf(left, sizeof left, ", ~%.0f s left", *p.seconds_left);
    std::fprintf(stderr, "\r[%s] %3.0f%% %s %zu/%zu%s\033[K", bar.c_str(), p.fraction * 100.0, stage, p.layer,
                 p.layer_count, left);
    std::fflush(stderr);
    m_drawn = true;
  }
  void finish() {
    if (m_drawn) std::fputc('\n', stderr);
    m_drawn = false;
  }
  ~ProgressBar() { finish(); }

 private:
  bool m_drawn = false;
};

void check_output_path(const std::filesystem::path& out) {
  const auto parent = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
  std::error_code error;
  if (!std::filesystem::is_directory(parent, error))
    throw Error(Error::Kind::Io,
                "--out " + out.string() + ": directory " + parent.string() + " does not exist");
  if (std::filesystem::is_directory(out, error))
    throw Error(Error::Kind::Io, "--out " + out.string() + " is a directory; name the report file");
}

void run_profile(const ProfileArguments& a) {
  if (a.demo == !a.model_dir.empty())
    throw Error(Error::Kind::InvalidInput,
                "profile: give either a checkpoint directory or --demo (exactly one)");
  check_output_path(a.out);
  const auto choice = runtime::backend_choice_from_string(a.backend);
  if (!choice)
    throw Error(Error::Kind::InvalidInput, "--backend " + a.backend + ": expected auto, cuda or cpu");
  // Options are checked before anything slow (demo generation, weight loading) starts.
  const std::vector<int> layers = a.layers.empty() ? std::vector<int>{} : parse_layer_list(a.layers);

  std::filesystem::path directory = a.model_dir;
  if (a.demo) {
    directory = ensure_demo_model([&](const std::string& line) {
      if (!a.quiet) std::fprintf(stderr, "demo model: %s\n", line.c_str());
    });
  }
  Checkpoint::Options open_options;
  if (!a.activation.empty()) open_options.activation_override = activation_from_string(a.activation);
  const Checkpoint checkpoint = Checkpoint::open(directory, open_options);

  runtime::Runtime runtime = runtime::make_runtime(*choice, a.device);
  const DeviceInfo device = runtime.backend->device();
  // The runtime's note already says why it fell back (to the CPU, or to CUDA events).
  if (!runtime.note.empty())
    std::fprintf(stderr, "twellscope-cli: %s\n", runtime.note.c_str());
  else if (device.backend == "cpu")
    std::fprintf(stderr, "twellscope-cli: running the CPU backend on %s: timings are CPU timings\n",
                 device.name.c_str());
  else
    std::fprintf(stderr, "twellscope-cli: running on %s (%s), timed with %s\n", device.name.c_str(),
                 device.kernel_family.c_str(), runtime.tracer->info().name.c_str());
  runtime.backend->load(checkpoint);

  ProfileConfig config;
  config.seed = a.seed;
  config.paths = a.paths;
  config.compression = a.compression;
  config.highest_precision = a.highest_precision;
  config.twell_kernels = parse_twell_kernel_request(a.twell_kernels);
  if (!config.twell_kernels.is_auto())
    std::fprintf(stderr, "twellscope-cli: TwELL kernels %s (gate/up_down/overflow), as asked\n",
                 to_string(config.twell_kernels).c_str());
  config.warmup = a.warmup;
  config.repetitions = a.repetitions;
  config.layers = layers;
  config.flush_l2 = !a.no_flush_l2;
  config.end_to_end = !a.no_end_to_end;
  config.map_shape = {a.map_rows, a.map_cols};
  config.dispatch_break_even = a.dispatch_break_even;
  const auto vocab = static_cast<std::uint32_t>(checkpoint.config().vocab_size);
  const TokenBatch tokens = a.tokens_file.empty() ? random_tokens(a.batch, a.sequence, vocab, a.seed)
                                                  : read_token_file(a.tokens_file, vocab);

  const bool show_bar = !a.quiet && ::isatty(STDERR_FILENO);
  ProgressBar bar;
  InterruptGuard interrupt;
  Session session(*runtime.backend, *runtime.tracer,
                  summarize_model(checkpoint, a.demo ? "demo" : a.model_dir));
  Report report;
  try {
    report = session.run(config, tokens, [&](const SessionProgress& p) {
      if (show_bar) bar.draw(p);
      return !g_interrupted.load();
    });
  } catch (const IncompleteRunError& e) {
    bar.finish();
    Report partial = e.partial_report();
    if (!runtime.note.empty()) partial.warnings.push_back(runtime.note);
    save_report(partial, a.out);
    throw Error(e.kind(), std::string(e.what()) + "; partial report (" +
                              std::to_string(partial.layers.size()) + " layers) written to " + a.out);
  } catch (const Error& e) {
    bar.finish();
    if (e.kind() == Error::Kind::Cancelled)
      throw Error(Error::Kind::Cancelled, "profiling interrupted; no report written");
    throw;
  }
  bar.finish();
  if (!runtime.note.empty()) report.warnings.push_back(runtime.note);
  save_report(report, a.out);

  for (const auto& warning : report.warnings)
    if (warning != runtime.note)  // printed when the run started
      std::fprintf(stderr, "warning: %s\n", warning.c_str());
  std::printf("Wrote %s: %zu layers profiled on %s (%s timings)", a.out.c_str(), report.layers.size(),
              report.device.name.c_str(), report.tracer.clock.c_str());
  if (const auto speedup = report.end_to_end_speedup())
    std::printf(", end-to-end TwELL/dense throughput %.3fx", *speedup);
  if (const auto speedup = report.dispatch_end_to_end_speedup())
    std::printf(", per-layer dispatch/dense %.3fx", *speedup);
  std::printf("\n");
  if (report.dispatch_break_even)
    std::printf("Dispatch: TwELL in %zu of %zu layers, below the break-even of %.2f %% (%s)\n",
                report.dispatched_layers(twell::FfnPath::Twell).size(), report.layers.size(),
                100.0 * report.dispatch_break_even->density, report.dispatch_break_even->basis.c_str());
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArguments>();
  auto* command = app.add_subcommand(
      "profile",
      "Profile a checkpoint: FFN activation sparsity per layer, dense vs TwELL FFN timings and errors, "
      "end-to-end throughput; writes a JSON report");
  command->add_option("MODEL_DIR", a->model_dir,
                      "Hugging Face checkpoint directory (config.json + safetensors)");
  command->add_flag("--demo", a->demo, "Profile the built-in demo model (generated once, then cached)");
  auto* tokens_file = command
                          ->add_option("--tokens-file", a->tokens_file,
                                       "Token ids: whitespace-separated integers, one sequence per line")
                          ->check(CLI::ExistingFile);
  auto* batch = command->add_option("--batch", a->batch, "Sequences of random tokens")
                    ->capture_default_str()
                    ->check(CLI::PositiveNumber);
  auto* sequence = command->add_option("--seq", a->sequence, "Tokens per sequence")
                       ->capture_default_str()
                       ->check(CLI::PositiveNumber);
  auto* seed = command->add_option("--seed", a->seed, "Seed of the random tokens")->capture_default_str();
  tokens_file->excludes(batch)->excludes(sequence)->excludes(seed);
  command->add_option("--activation", a->activation, "Override the FFN activation the config implies")
      ->check(CLI::IsMember({"relu", "silu"}));
  command->add_option("--paths", a->paths, "FFN paths to time, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"dense", "twell"}))
      ->capture_default_str();
  command
      ->add_option("-C,--compression", a->compression, "TwELL compression factor (tile capacity 256/C - 1)")
      ->check(CLI::IsMember({8, 4, 2}))
      ->capture_default_str();
  command->add_option("--warmup", a->warmup, "Untimed warm-up repetitions per layer, path and forward")
      ->capture_default_str();
  command->add_option("--reps", a->repetitions, "Timed repetitions (the report gives their median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--backend", a->backend, "auto: CUDA when a device is present, else the CPU")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  command->add_option("--device", a->device, "CUDA device index")->capture_default_str();
  command->add_option("--layers", a->layers, "Layers to profile, e.g. 0,2,5-7 (default: all)");
  command->add_flag("--no-end-to-end", a->no_end_to_end, "Skip the end-to-end forwards");
  command->add_flag("--no-flush-l2", a->no_flush_l2, "Keep the L2 cache warm between timed repetitions");
  command->add_flag("--highest-precision", a->highest_precision, "All-fp32 up/down products in TwELL");
  command
      ->add_option("--twell-kernels", a->twell_kernels,
                   "TwELL kernels as gate[/up_down[/overflow]], e.g. sm90/balanced_cta/sparse (CUDA backend; "
                   "parts left out are auto; `devices --kernels` describes them). The dispatch's "
                   "break-even was measured with the auto kernels")
      ->check([](const std::string& text) {
        try {
          parse_twell_kernel_request(text);
          return std::string();
        } catch (const Error& error) {
          return std::string(error.what());
        }
      })
      ->capture_default_str();
  command
      ->add_option("--dispatch-break-even", a->dispatch_break_even,
                   "Density (a fraction, e.g. 0.013 for 1.3 %) below which the per-layer dispatch runs a "
                   "layer on TwELL, instead of the device's measured break-even")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1)"));
  command->add_option("--map-rows", a->map_rows, "Token rows of the per-layer firing map")
      ->capture_default_str();
  command->add_option("--map-cols", a->map_cols, "Neuron columns of the per-layer firing map")
      ->capture_default_str();
  command->add_option("--out", a->out, "Report file to write (JSON; written atomically)")->required();
  command->add_flag("-q,--quiet", a->quiet, "No progress bar");
  command->footer(
      std::string("A progress bar is drawn on stderr when it is a terminal; Ctrl-C cancels without "
                  "writing a report.\n") +
      kExitCodesHelp);
  command->callback([a] { run_profile(*a); });
}

}  // namespace twell::cli
