// attnjit: warm-up, JSON test runner, benchmarks, cache maintenance and environment report.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "attnjit/error.hpp"
#include "attnjit/attnjit.h"
#include "cli_commands.hpp"

namespace attnjit::cli {

void add_cache_dir_option(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--cache-dir", [](const std::string& dir) { ::setenv("ATTNJIT_CACHE_DIR", dir.c_str(), 1); },
      "Cubin cache folder for this command (default: ATTNJIT_CACHE_DIR, else ~/.cache/attnjit)");
}

std::vector<std::string> parse_arch_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string a = text.substr(pos, comma - pos);
    pos = comma + 1;
    size_t i = 3;
    int n = 0;
    const bool prefix = a.rfind("sm_", 0) == 0;
    while (prefix && i < a.size() && a[i] >= '0' && a[i] <= '9') n = n * 10 + (a[i++] - '0');
    const bool form = prefix && i > 3 && (i == a.size() || (i + 1 == a.size() && a[i] == 'a'));
    if (!form || n < 80)
      throw CLI::ValidationError("--arch", fmt::format("expected sm_<NN> or sm_<NN>a with NN >= 80 (e.g. sm_90a), got '{}'", a));
    out.push_back(a);
  }
  return out;
}

}  // namespace attnjit::cli

int main(int argc, char** argv) {
  CLI::App app{"attnjit: JIT attention kernels (NVRTC, cubin cache, plan/execute)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("attnjit ") + attnjit_version());
  attnjit::cli::add_warmup_command(app);
  attnjit::cli::add_test_command(app);
  attnjit::cli::add_bench_command(app);
  attnjit::cli::add_cache_command(app);
  attnjit::cli::add_info_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (a command's own failure is its code).
    const int rc = app.exit(e);
    return rc == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) ? rc : 2;
  } catch (const attnjit::Error& e) {
    fmt::print(stderr, "attnjit: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnjit: {}\n", e.what());
    return 2;
  }
  return 0;
}
