#include <map>
#include <mutex>
#include <set>
#include <string>

#include "jit/embedded_templates.hpp"
#include "jit/sha256.hpp"

namespace attnjit::jit {

namespace {

const EmbeddedTemplate* find_template(std::span<const EmbeddedTemplate> set, std::string_view path) {
  for (const auto& t : set)
    if (path == t.path) return &t;
  return nullptr;
}

// The quoted includes of a source: the text between the quotes of every line `# include "..."`.
std::vector<std::string> quoted_includes(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string_view::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string_view::npos || line.substr(i, 7) != "include") continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string_view::npos || line[i] != '"') continue;
    const size_t close = line.find('"', i + 1);
    if (close != std::string_view::npos) out.emplace_back(line.substr(i + 1, close - i - 1));
  }
  return out;
}

}  // namespace

std::vector<std::string> template_closure(std::string_view file, std::span<const EmbeddedTemplate> set) {
  std::set<std::string> seen;
  std::vector<std::string> todo{std::string(file)};
  while (!todo.empty()) {
    const std::string path = todo.back();
    todo.pop_back();
    const EmbeddedTemplate* t = find_template(set, path);
    if (!t || !seen.insert(path).second) continue;
    const std::string dir = path.find('/') == std::string::npos ? "" : path.substr(0, path.rfind('/') + 1);
    for (const std::string& inc : quoted_includes(t->text)) {
      if (find_template(set, inc)) todo.push_back(inc);
      else if (find_template(set, dir + inc)) todo.push_back(dir + inc);
    }
  }
  return {seen.begin(), seen.end()};
}

std::string template_closure_sha256(std::string_view file, std::span<const EmbeddedTemplate> set) {
  // NOTE: "path\0length\0text" per file, so that no two closures serialise alike.
  std::string s;
  for (const std::string& path : template_closure(file, set)) {
    const std::string_view text = find_template(set, path)->text;
    s += path;
    s += '\0';
    s += std::to_string(text.size());
    s += '\0';
    s += text;
  }
  return sha256_hex(s);
}

std::string template_closure_sha256(std::string_view file) {
  static std::mutex mu;
  static std::map<std::string, std::string, std::less<>> memo;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memo.find(file); it != memo.end()) return it->second;
  return memo.emplace(std::string(file), template_closure_sha256(file, embedded_templates())).first->second;
}

}  // namespace attnjit::jit
