// attnjit: warm-up, JSON test runner, benchmarks, cache maintenance and environment report.
#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "cli_commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"attnjit: JIT attention kernels (NVRTC, cubin cache, plan/execute)"};
  app.require_subcommand(1);
  attnjit::cli::add_warmup_command(app);
  attnjit::cli::add_test_command(app);
  attnjit::cli::add_bench_command(app);
  attnjit::cli::add_cache_command(app);
  attnjit::cli::add_info_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const attnjit::Error& e) {
    fmt::print(stderr, "attnjit: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnjit: {}\n", e.what());
    return 2;
  }
  return 0;
}
