#include "jit/spec_builder.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace attnjit::jit {

SpecBuilder::SpecBuilder(std::string op, std::string template_file, std::string kernel, std::string arch)
    : kernel_(std::move(kernel)) {
  spec_.op = std::move(op);
  spec_.template_file = std::move(template_file);
  spec_.arch = std::move(arch);
}

SpecBuilder& SpecBuilder::add_field(std::string key, std::string value, std::string arg) {
  spec_.fields.emplace_back(std::move(key), std::move(value));
  field_args_.push_back(std::move(arg));
  return *this;
}

SpecBuilder& SpecBuilder::arg() {
  if (field_args_.empty()) throw std::logic_error("SpecBuilder: arg() before any field");
  return add_arg(field_args_.back());
}

SpecBuilder& SpecBuilder::add_arg(std::string text, bool on) {
  Part p;
  p.text = std::move(text);
  p.on = on;
  p.field = static_cast<int>(spec_.fields.size()) - 1;
  args_.push_back(std::move(p));
  last_ = &args_;
  return *this;
}

SpecBuilder& SpecBuilder::add_name(const std::string& pattern, bool on, bool glued) {
  Part p;
  p.text = pattern;
  if (const size_t at = pattern.find("{}"); at != std::string::npos && !spec_.fields.empty())
    p.text.replace(at, 2, spec_.fields.back().second);
  p.on = on;
  p.glued = glued;
  p.field = static_cast<int>(spec_.fields.size()) - 1;
  names_.push_back(std::move(p));
  last_ = &names_;
  return *this;
}

SpecBuilder& SpecBuilder::place(const std::string& key, int side) {
  if (!last_) throw std::logic_error("SpecBuilder: before / after with nothing declared to move");
  last_->back().anchor = key;
  last_->back().side = side;
  return *this;
}

// The parts that are on, in field order: a part where its field is, or before / after its anchor field;
// parts at the same place keep their declaration order.
std::vector<const SpecBuilder::Part*> SpecBuilder::ordered(const std::vector<Part>& parts) const {
  std::vector<std::pair<std::pair<int, int>, const Part*>> placed;
  for (const Part& p : parts) {
    if (!p.on) continue;
    int field = p.field;
    if (!p.anchor.empty()) {
      const auto& f = spec_.fields;
      const auto it = std::find_if(f.begin(), f.end(), [&](const auto& kv) { return kv.first == p.anchor; });
      if (it == f.end()) throw std::logic_error("SpecBuilder: no field '" + p.anchor + "' to place '" + p.text + "' by");
      field = static_cast<int>(it - f.begin());
    }
    placed.push_back({{field, p.side}, &p});
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Part*> out;
  for (const auto& [where, p] : placed) out.push_back(p);
  return out;
}

KernelSpec SpecBuilder::build() const {
  KernelSpec s = spec_;
  s.entry = kernel_;
  const auto args = ordered(args_);
  for (size_t i = 0; i < args.size(); ++i) s.entry += (i ? ", " : "<") + args[i]->text;
  if (!args.empty()) s.entry += ">";
  s.name = s.op;
  for (const Part* p : ordered(names_)) s.name += (p->glued ? "" : ".") + p->text;
  return s;
}

}  // namespace attnjit::jit
