#include "jit/nvrtc_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "attnjit/error.hpp"

#ifndef ATTNJIT_NVRTC_SONAME
#define ATTNJIT_NVRTC_SONAME "libnvrtc.so.13"
#endif
#ifndef ATTNJIT_NVRTC_BUILD_VERSION
#define ATTNJIT_NVRTC_BUILD_VERSION "13.0"
#endif
#ifndef ATTNJIT_CUDA_LIBRARY_DIR
#define ATTNJIT_CUDA_LIBRARY_DIR ""
#endif

namespace attnjit::jit {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

const NvrtcLibrary& NvrtcLibrary::get() {
  static const NvrtcLibrary instance;
  return instance;
}

NvrtcLibrary::NvrtcLibrary() {
  std::vector<std::string> candidates;
  const std::string forced = env("ATTNJIT_NVRTC_PATH");
  if (!forced.empty()) {
    candidates.push_back(forced);
  } else {
    candidates.push_back(ATTNJIT_NVRTC_SONAME);
    // lib64: a toolkit install; lib: NVIDIA's pip wheels (site-packages/nvidia/cu13/lib).
    for (const std::string& home : {env("ATTNJIT_CUDA_HOME"), env("CUDA_HOME")})
      if (!home.empty())
        for (const char* lib : {"/lib64/", "/lib/"}) candidates.push_back(home + lib + ATTNJIT_NVRTC_SONAME);
    if (*ATTNJIT_CUDA_LIBRARY_DIR) candidates.push_back(std::string(ATTNJIT_CUDA_LIBRARY_DIR) + "/" + ATTNJIT_NVRTC_SONAME);
  }
  void* handle = nullptr;
  for (const auto& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      path_ = c;
      break;
    }
    const char* err = dlerror();
    reason_ += (reason_.empty() ? "" : "; ") + std::string(err ? err : c + ": not found");
  }
  if (!handle) return;
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (!fn) {
      ok = false;
      reason_ = fmt::format("{}: symbol {} not found", path_, name);
    }
  };
  sym(nvrtcVersion, "nvrtcVersion");
  sym(nvrtcGetErrorString, "nvrtcGetErrorString");
  sym(nvrtcCreateProgram, "nvrtcCreateProgram");
  sym(nvrtcDestroyProgram, "nvrtcDestroyProgram");
  sym(nvrtcAddNameExpression, "nvrtcAddNameExpression");
  sym(nvrtcCompileProgram, "nvrtcCompileProgram");
  sym(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(nvrtcGetProgramLog, "nvrtcGetProgramLog");
  sym(nvrtcGetLoweredName, "nvrtcGetLoweredName");
  sym(nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  sym(nvrtcGetCUBIN, "nvrtcGetCUBIN");
  available_ = ok;
  if (ok) reason_.clear();
}

void NvrtcLibrary::require(const char* what) const {
  if (available_) return;
  throw CompileError(fmt::format("{}: NVRTC is not available ({}); install the CUDA toolkit or set "
                                 "ATTNJIT_NVRTC_PATH, or run with a cache filled by `attnjit warmup`",
                                 what, reason_),
                     what, "");
}

std::string NvrtcLibrary::version() const {
  if (!available_) return ATTNJIT_NVRTC_BUILD_VERSION;
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string NvrtcLibrary::cuda_include_dir() {
  for (const std::string& home : {env("ATTNJIT_CUDA_HOME"), env("CUDA_HOME")}) {
    if (home.empty()) continue;
    std::error_code ec;
    if (std::filesystem::is_directory(home + "/include", ec)) return home + "/include";
  }
  return ATTNJIT_CUDA_INCLUDE_DIR;
}

}  // namespace attnjit::jit
