// The cache key of a kernel: sha256 over a canonical, versioned serialisation of everything that can
// change the binary (DESIGN.md): key schema, library version, the embedded templates' hash, the spec
// (op, template, entry, every field in order), target arch, NVRTC major.minor and the normalised
// compile options. Never paths, device index or driver version.
#pragma once
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"

namespace attnjit::jit {

inline constexpr int kKeySchemaVersion = 2;  // 2: the templates line hashes the include closure

struct KernelKey {
  std::string hex;            // 64 hex digits
  std::string serialisation;  // the exact text hashed (kept in the manifest)
};

// `options` are the compile options without include paths; `nvrtc_version` is "13.0".
// `templates_sha256` defaults to the include closure's hash of spec.template_file.
KernelKey make_kernel_key(const KernelSpec& spec, const std::vector<std::string>& options,
                          const std::string& nvrtc_version, const std::string& templates_sha256 = "");

}  // namespace attnjit::jit
