// qjoule's command line, as one call (cli/run_cli.h): main.cpp is only this, and a test can run a
// command in its own process (with a format it registered, say).
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/run_cli.h"
#include "qjoule/build_info.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/kernel_overrides.h"

namespace {

// Computed when --version is asked for: where a CUDA build's cuBLASLt would load from (not loaded).
std::string version_text() {
  return fmt::format("qjoule {} (commit {}, {} build, {}; backends: {}){}", qjoule::build_info::kVersion,
                     qjoule::build_info::kGitCommit, qjoule::build_info::kBuildType, qjoule::build_info::kCompiler,
                     qjoule::build_info::kBackends,
                     QJOULE_HAVE_CUDA ? "\ncuBLASLt (loaded on first GPU use): " + qjoule::kernels::cublaslt_location()
                                      : std::string());
}

// Whether the command line only asks for help or the version (nothing runs).
bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help" || a == "--version") return true;
  }
  return false;
}

}  // namespace

int qjoule::cli::run_cli(int argc, char** argv) {
  CLI::App app{
      "qjoule: what does quantizing this model really buy, in milliseconds, joules and accuracy?\n"
      "Every number it prints comes from a kernel that really ran, or says `unavailable` and why.\n"};
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(1);
  app.fallthrough();

  qjoule::cli::CommandContext ctx;
  qjoule::cli::add_info_command(app, ctx);
  qjoule::cli::add_eval_command(app, ctx);
  qjoule::cli::add_ppl_command(app, ctx);
  qjoule::cli::add_score_command(app, ctx);
  qjoule::cli::add_generate_command(app, ctx);
  qjoule::cli::add_export_command(app, ctx);
  qjoule::cli::add_sensors_command(app, ctx);
  qjoule::cli::add_limits_command(app, ctx);
  qjoule::cli::add_energy_command(app, ctx);
  qjoule::cli::add_bench_command(app, ctx);
  qjoule::cli::add_report_command(app, ctx);

  try {
    // A kernel choice the environment forces with a value it does not take stops a command before it
    // starts, in one line (qjoule/kernels/kernel_overrides.h).
    if (!asks_for_help(argc, argv)) (void)qjoule::kernels::kernel_overrides_in_force();
    app.parse(argc, argv);
  } catch (const CLI::ValidationError& e) {
    // A flag's value outside its range: one line naming the flag, the value and the range.
    std::fprintf(stderr, "qjoule: error: %s\n", e.what());
    return 1;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error (a missing argument, a value that does not convert, an unknown flag): one line,
    // with CLI11's exit code so scripts can tell it from a run's failure.
    std::fprintf(stderr, "qjoule: error: %s (see --help)\n", e.what());
    return e.get_exit_code();
  } catch (const qjoule::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "qjoule: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "qjoule: internal error: %s\n", e.what());
    return 3;
  }
  return ctx.exit_code;
}
