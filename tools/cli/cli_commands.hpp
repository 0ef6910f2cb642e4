// The `attnjit` command line: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace attnjit::cli {
void add_warmup_command(CLI::App& app);
void add_test_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_info_command(CLI::App& app);

// `--cache-dir DIR` on a subcommand: the cache folder for this run (sets ATTNJIT_CACHE_DIR before the
// command's runtime reads its options, so it wins over the environment).
void add_cache_dir_option(CLI::App* cmd);
// Splits "sm_80,sm_90a" and checks each: sm_<NN> or sm_<NN>a with NN >= 80 (the portable kernels'
// minimum). Throws CLI::ValidationError naming the value.
std::vector<std::string> parse_arch_list(const std::string& text);
}  // namespace attnjit::cli
