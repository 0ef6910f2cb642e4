// Kernel template sources embedded in the library at build time (cmake/EmbedTemplates.cmake), so an
// installed binary needs no source tree. Paths are relative to templates/ ("common/fp8.cuh").
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::jit {
struct EmbeddedTemplate {
  const char* path;
  const char* text;
};
std::span<const EmbeddedTemplate> embedded_templates();
// sha256 over every template's path and text, in sorted path order (`attnjit cache info`).
std::string_view embedded_templates_sha256();

// The templates `file` includes, itself and transitively (`#include "..."` lines resolved against the
// templates root, then against the including file's folder; names found in neither, the toolkit's
// headers, are left out), sorted by path. `set` defaults to the embedded templates.
std::vector<std::string> template_closure(std::string_view file, std::span<const EmbeddedTemplate> set);
// sha256 over the closure's paths and texts: the part of a kernel's key that its sources contribute,
// so that editing one family's templates leaves the other families' cached kernels valid. Computed once
// per file for the embedded set.
std::string template_closure_sha256(std::string_view file, std::span<const EmbeddedTemplate> set);
std::string template_closure_sha256(std::string_view file);
}  // namespace attnjit::jit
