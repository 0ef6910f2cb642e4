// NVRTC, loaded at run time: dlopen of $ATTNJIT_NVRTC_PATH when set (and nothing else then), else
// libnvrtc.so.<major of the build's toolkit> from the loader's search path, then from
// $ATTNJIT_CUDA_HOME/lib64 and /lib (the pip wheels' layout), $CUDA_HOME/lib64 and /lib, and the build-time toolkit. Loaded on the first compile
// only, so a no-JIT deployment that loads a warmed cache needs no toolkit: libnvrtc is not a NEEDED
// library of libattnjit.so.
#pragma once
#include <nvrtc.h>

#include <string>

namespace attnjit::jit {

class NvrtcLibrary {
 public:
  static const NvrtcLibrary& get();

  bool available() const { return available_; }
  // Why it is absent ("libnvrtc.so.13: cannot open shared object file ...").
  const std::string& unavailable_reason() const { return reason_; }
  // The file that was loaded.
  const std::string& path() const { return path_; }
  // Throws CompileError naming what needed NVRTC when it could not be loaded.
  void require(const char* what) const;

  // "13.0": the loaded library's version, else the build's toolkit version (so that a no-JIT
  // deployment computes the kernel keys that a warm-up with that toolkit wrote).
  std::string version() const;

  // The CUDA headers NVRTC compiles against: $ATTNJIT_CUDA_HOME/include, $CUDA_HOME/include (the
  // first that exists), else the build-time toolkit's include directory.
  static std::string cuda_include_dir();

  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcAddNameExpression) nvrtcAddNameExpression = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetLoweredName) nvrtcGetLoweredName = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;

 private:
  NvrtcLibrary();
  bool available_ = false;
  std::string reason_, path_;
};

}  // namespace attnjit::jit
