// Each `qjoule` subcommand lives in its own cmd_<name>.cpp and registers itself with the app.
// A command's callback sets `ctx.exit_code` (0 unless the command says otherwise); errors are
// thrown as qjoule::Error and printed by main() as one line.
#pragma once

#include <CLI/CLI.hpp>

namespace qjoule::cli {

struct CommandContext {
  int exit_code = 0;
};

void add_info_command(CLI::App& app, CommandContext& ctx);
void add_eval_command(CLI::App& app, CommandContext& ctx);
void add_sensors_command(CLI::App& app, CommandContext& ctx);
void add_energy_command(CLI::App& app, CommandContext& ctx);
void add_bench_command(CLI::App& app, CommandContext& ctx);
void add_report_command(CLI::App& app, CommandContext& ctx);
void add_limits_command(CLI::App& app, CommandContext& ctx);
void add_ppl_command(CLI::App& app, CommandContext& ctx);
void add_score_command(CLI::App& app, CommandContext& ctx);
void add_generate_command(CLI::App& app, CommandContext& ctx);
void add_export_command(CLI::App& app, CommandContext& ctx);

}  // namespace qjoule::cli
