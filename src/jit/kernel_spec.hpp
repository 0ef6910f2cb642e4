// What the JIT needs to build one kernel: the template file, the name expression to instantiate,
// the static configuration (every field that shapes the binary, in a fixed order) and the target.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attnjit::jit {

struct KernelSpec {
  std::string op;             // "paged_kv_write"
  std::string template_file;  // relative to templates/: "kv_cache/paged_kv_write.cuh"
  std::string entry;          // name expression: "attnjit::kernels::paged_kv_write<__half, __half, 128>"
  // Static configuration, every field once, in the planner's fixed order: {"backend", "portable"}, ...
  std::vector<std::pair<std::string, std::string>> fields;
  std::string arch;           // "sm_90a"
  std::string name;           // readable, without arch: "paged_kv_write.portable.bf16.e4m3.d128"

  // "paged_kv_write.portable.bf16.e4m3.d128.sm_90a"
  std::string describe() const { return name + "." + arch; }
};

}  // namespace attnjit::jit
