// SPDX-License-Identifier: GPL-3.0-or-later
// twellscope-cli: the headless front end. Exit codes: 0 success, 2 usage error, 3 invalid input,
// 4 unsupported, 5 I/O error, 6 device error, 7 out of memory, 130 cancelled, 70 internal error.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.hpp"
#include "twell/error.hpp"
#include "twell/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"twellscope-cli: profile activation sparsity and dense vs TwELL FFN speed of LLM checkpoints"};
  app.set_version_flag("--version", std::string("twellscope ") + twell::version() + " (" + twell::git_commit() + ")");
  app.require_subcommand(1);
  twell::cli::add_devices_command(app);
  twell::cli::add_gen_model_command(app);
  twell::cli::add_inspect_command(app);
  twell::cli::add_profile_command(app);
  twell::cli::add_export_command(app);
  twell::cli::add_compare_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const twell::Error& e) {
    std::fprintf(stderr, "twellscope-cli: error: %s\n", e.what());
    return twell::exit_code_for(e.kind());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "twellscope-cli: error: out of host memory\n");
    return twell::exit_code_for(twell::Error::Kind::OutOfMemory);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twellscope-cli: internal error: %s\n", e.what());
    return twell::exit_code_for(twell::Error::Kind::Internal);
  }
  return 0;
}
