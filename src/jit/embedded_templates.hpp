// Kernel template sources embedded in the library at build time (cmake/EmbedTemplates.cmake), so an
// installed binary needs no source tree. Paths are relative to templates/ ("common/fp8.cuh").
#pragma once
#include <span>
#include <string_view>

namespace attnjit::jit {
struct EmbeddedTemplate {
  const char* path;
  const char* text;
};
std::span<const EmbeddedTemplate> embedded_templates();
// sha256 over every template's path and text, in sorted path order: part of every kernel key.
std::string_view embedded_templates_sha256();
}  // namespace attnjit::jit
