// NVRTC: instantiates a kernel template (embedded sources as headers) through a name expression and
// compiles it to a cubin for the spec's arch.
#pragma once
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"

namespace attnjit::jit {

struct CompileResult {
  std::string cubin;
  std::string lowered_name;  // mangled kernel symbol in the cubin
  std::string log;           // NVRTC log (ptxas -v resource lines included)
  double seconds = 0;
};

struct CompileSettings {
  bool lineinfo = false;
  std::string dump_sources_dir;  // when set, each compiled source is written there
};

class NvrtcCompiler {
 public:
  explicit NvrtcCompiler(CompileSettings settings = {});

  // The compile options that shape the binary (no include paths): they go into the key.
  std::vector<std::string> key_options(const KernelSpec& spec) const;
  // "13.0"
  static std::string version();
  // Throws CompileError (with describe() and the log) when NVRTC rejects the source.
  CompileResult compile(const KernelSpec& spec) const;
  // The translation unit NVRTC compiles for a spec.
  static std::string source_for(const KernelSpec& spec);

 private:
  CompileSettings settings_;
};

}  // namespace attnjit::jit
