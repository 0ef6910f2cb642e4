// A KernelSpec from one list of fields. Each field is declared once, with its cache-key value, and says there
// what else it contributes: the template argument(s) of the name expression and the segment of the readable
// name. The entry, the key fields and the name therefore come from the same values and cannot drift apart.
//
//   jit::SpecBuilder b("paged_kv_write", "kv_cache/paged_kv_write.cuh", "attnjit::kernels::paged_kv_write", arch);
//   b.field("backend", "portable").name("{}");
//   b.field("dtype", dtype_name(dt)).arg(device_type_name(dt)).name("{}");
//   b.field("head_dim", D).arg().name("d{}");
//   jit::KernelSpec s = b.build();
//   // entry "attnjit::kernels::paged_kv_write<__nv_bfloat16, 128>", fields backend=portable dtype=bf16
//   // head_dim=128, name "paged_kv_write.portable.bf16.d128"
//
// Contributions follow the fields' order. Where a kernel's template parameters or its name put one elsewhere,
// before(key) / after(key) move the contribution just declared next to the field `key` (declared earlier or
// later), so the order is said where the exception is, not by hand-written strings.
#pragma once
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "jit/kernel_spec.hpp"

namespace attnjit::jit {

class SpecBuilder {
 public:
  // `kernel`: the template's qualified name; the entry is kernel<args...> (bare when there are none). The
  // readable name starts with `op`.
  SpecBuilder(std::string op, std::string template_file, std::string kernel, std::string arch);
  SpecBuilder(const SpecBuilder&) = delete;
  SpecBuilder& operator=(const SpecBuilder&) = delete;

  // A field of the cache key, in key order: a bool is "1" / "0", an integer its decimal digits, else the text.
  template <typename T>
  SpecBuilder& field(std::string key, const T& value) {
    return add_field(std::move(key), key_text(value), arg_text(value));
  }

  // The field's template argument: its value (a bool as true / false) or, given, `value` rendered the same
  // way. A field may contribute several.
  SpecBuilder& arg();
  template <typename T>
  SpecBuilder& arg(const T& value) {
    return add_arg(arg_text(value));
  }
  template <typename T>
  SpecBuilder& arg_if(bool on, const T& value) {
    return add_arg(arg_text(value), on);
  }

  // The field's segment of the readable name, ".pattern" with "{}" standing for the field's value; name_if
  // only when `on` (flags: ".causal"); name_glued without the dot ("bn64" "s2" -> "bn64s2").
  SpecBuilder& name(const std::string& pattern) { return add_name(pattern, true, false); }
  SpecBuilder& name_if(bool on, const std::string& pattern) { return add_name(pattern, on, false); }
  SpecBuilder& name_glued(const std::string& pattern) { return add_name(pattern, true, true); }

  // Moves the contribution just declared (template argument or name segment) just before / after the
  // contributions of the field `key`.
  SpecBuilder& before(const std::string& key) { return place(key, -1); }
  SpecBuilder& after(const std::string& key) { return place(key, 1); }

  // Throws std::logic_error where before / after names no field.
  KernelSpec build() const;

 private:
  struct Part {
    std::string text;
    bool on = true;
    bool glued = false;
    int field = -1;      // the field it belongs to (-1: declared before any field)
    std::string anchor;  // before / after this field instead of its own
    int side = 0;        // -1 before, 0 in its own place, +1 after
  };

  template <typename T>
  static std::string key_text(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return v ? "1" : "0";
    else if constexpr (std::is_integral_v<T>) return std::to_string(v);
    else return std::string(v);
  }
  template <typename T>
  static std::string arg_text(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
    else return key_text(v);
  }

  SpecBuilder& add_field(std::string key, std::string value, std::string arg);
  SpecBuilder& add_arg(std::string text, bool on = true);
  SpecBuilder& add_name(const std::string& pattern, bool on, bool glued);
  SpecBuilder& place(const std::string& key, int side);
  std::vector<const Part*> ordered(const std::vector<Part>& parts) const;

  KernelSpec spec_;  // op, template file, arch and the fields as declared
  std::string kernel_;
  std::vector<std::string> field_args_;  // each field's value as a template argument
  std::vector<Part> args_, names_;
  std::vector<Part>* last_ = nullptr;    // where the contribution just declared went (its back())
};

}  // namespace attnjit::jit
