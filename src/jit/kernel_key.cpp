#include "jit/kernel_key.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "jit/embedded_templates.hpp"
#include "jit/sha256.hpp"

namespace attnjit::jit {

KernelKey make_kernel_key(const KernelSpec& spec, const std::vector<std::string>& options,
                          const std::string& nvrtc_version, const std::string& templates_sha256) {
  // NOTE: one "name value" per line; values never contain newlines, so the text is unambiguous.
  std::string s = fmt::format("attnjit-kernel-key {}\n", kKeySchemaVersion);
  s += fmt::format("library {}\n", ATTNJIT_VERSION);
  s += fmt::format("templates {}\n",
                   templates_sha256.empty() ? template_closure_sha256(spec.template_file) : templates_sha256);
  s += fmt::format("op {}\ntemplate {}\nentry {}\n", spec.op, spec.template_file, spec.entry);
  // NOTE: field names are identifiers chosen by the planners; a name with '=' or a newline would make
  // the text ambiguous, so it is refused.
  for (const auto& [k, v] : spec.fields) {
    if (k.find_first_of("=\n") != std::string::npos || v.find('\n') != std::string::npos)
      throw Error(Status::kInternal, fmt::format("kernel key: field '{}' has a character the key forbids", k));
    s += fmt::format("field {}={}\n", k, v);
  }
  s += fmt::format("arch {}\nnvrtc {}\n", spec.arch, nvrtc_version);
  for (const auto& o : options) s += fmt::format("option {}\n", o);
  return {sha256_hex(s), s};
}

}  // namespace attnjit::jit
