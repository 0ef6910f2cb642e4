// The `attnjit` command line: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

namespace attnjit::cli {
void add_warmup_command(CLI::App& app);
void add_test_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_info_command(CLI::App& app);
}  // namespace attnjit::cli
