#include "jit/nvrtc_compiler.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "attnjit/error.hpp"
#include "jit/embedded_templates.hpp"
#include "base/logging.hpp"
#include "jit/nvrtc_library.hpp"

namespace attnjit::jit {

namespace {

const NvrtcLibrary& nv() { return NvrtcLibrary::get(); }

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  nv().nvrtcGetProgramLogSize(prog, &size);
  std::string log(size, '\0');
  if (size) nv().nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

void check_nvrtc(nvrtcResult r, const char* what, const KernelSpec& spec, nvrtcProgram prog) {
  if (r == NVRTC_SUCCESS) return;
  std::string log = prog ? program_log(prog) : std::string();
  throw CompileError(fmt::format("{} failed for kernel {}: {}\n{}", what, spec.describe(), nv().nvrtcGetErrorString(r), log),
                     spec.describe(), log);
}

}  // namespace

NvrtcCompiler::NvrtcCompiler(CompileSettings settings) : settings_(std::move(settings)) {}

std::string NvrtcCompiler::version() { return nv().version(); }

std::vector<std::string> NvrtcCompiler::key_options(const KernelSpec& spec) const {
  std::vector<std::string> opts = {
      "--gpu-architecture=" + spec.arch,
      "--std=c++17",
      "--ptxas-options=-v",
      "-DATTNJIT_NVRTC=1",
  };
  if (settings_.lineinfo) opts.push_back("--generate-line-info");
  return opts;
}

std::string NvrtcCompiler::source_for(const KernelSpec& spec) {
  return fmt::format("// attnjit kernel {}\n#include \"{}\"\n", spec.describe(), spec.template_file);
}

CompileResult NvrtcCompiler::compile(const KernelSpec& spec) const {
  nv().require(("compiling kernel " + spec.describe()).c_str());
  auto t0 = std::chrono::steady_clock::now();
  const auto templates = embedded_templates();
  std::vector<const char*> header_texts, header_names;
  for (const auto& t : templates) {
    header_names.push_back(t.path);
    header_texts.push_back(t.text);
  }
  const std::string source = source_for(spec);
  if (!settings_.dump_sources_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(settings_.dump_sources_dir, ec);
    std::ofstream(std::filesystem::path(settings_.dump_sources_dir) / (spec.describe() + ".cu"))
        << source << "// entry: " << spec.entry << "\n";
  }
  nvrtcProgram prog = nullptr;
  check_nvrtc(nv().nvrtcCreateProgram(&prog, source.c_str(), (spec.describe() + ".cu").c_str(),
                                 static_cast<int>(header_texts.size()), header_texts.data(), header_names.data()),
              "nvrtcCreateProgram", spec, nullptr);
  struct Guard {
    nvrtcProgram* p;
    ~Guard() { nv().nvrtcDestroyProgram(p); }
  } guard{&prog};
  check_nvrtc(nv().nvrtcAddNameExpression(prog, spec.entry.c_str()), "nvrtcAddNameExpression", spec, prog);

  std::vector<std::string> opts = key_options(spec);
  // NOTE: include paths stay out of the key: the headers' version is the NVRTC version, in the key.
  const std::string cuda_include = NvrtcLibrary::cuda_include_dir();
  opts.push_back("-I" + cuda_include);
  opts.push_back("-I" + cuda_include + "/cccl");
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  nvrtcResult r = nv().nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  CompileResult result;
  result.log = program_log(prog);
  if (r != NVRTC_SUCCESS) {
    throw CompileError(fmt::format("NVRTC could not compile kernel {} ({}):\n{}", spec.describe(),
                                   nv().nvrtcGetErrorString(r), result.log),
                       spec.describe(), result.log);
  }
  const char* lowered = nullptr;
  check_nvrtc(nv().nvrtcGetLoweredName(prog, spec.entry.c_str(), &lowered), "nvrtcGetLoweredName", spec, prog);
  result.lowered_name = lowered;
  size_t cubin_size = 0;
  check_nvrtc(nv().nvrtcGetCUBINSize(prog, &cubin_size), "nvrtcGetCUBINSize", spec, prog);
  result.cubin.resize(cubin_size);
  check_nvrtc(nv().nvrtcGetCUBIN(prog, result.cubin.data()), "nvrtcGetCUBIN", spec, prog);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  logger().info("compiled {} in {:.2f} s", spec.describe(), result.seconds);
  return result;
}

}  // namespace attnjit::jit
