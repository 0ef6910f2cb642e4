#include "jit/kernel_key.hpp"

#include <fmt/format.h>

#include "jit/embedded_templates.hpp"
#include "jit/sha256.hpp"

namespace attnjit::jit {

KernelKey make_kernel_key(const KernelSpec& spec, const std::vector<std::string>& options,
                          const std::string& nvrtc_version, const std::string& templates_sha256) {
  // NOTE: one "name value" per line; values never contain newlines, so the text is unambiguous.
  std::string s = fmt::format("attnjit-kernel-key {}\n", kKeySchemaVersion);
  s += fmt::format("library {}\n", ATTNJIT_VERSION);
  s += fmt::format("templates {}\n",
                   templates_sha256.empty() ? std::string(embedded_templates_sha256()) : templates_sha256);
  s += fmt::format("op {}\ntemplate {}\nentry {}\n", spec.op, spec.template_file, spec.entry);
  for (const auto& [k, v] : spec.fields) s += fmt::format("field {}={}\n", k, v);
  s += fmt::format("arch {}\nnvrtc {}\n", spec.arch, nvrtc_version);
  for (const auto& o : options) s += fmt::format("option {}\n", o);
  return {sha256_hex(s), s};
}

}  // namespace attnjit::jit
