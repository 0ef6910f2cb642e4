// Checks for an op's call arguments, raising InvalidArgument in SPEC.md §1.11's format:
// "<op>: <category>: <argument>: expected ..., got ...".
#pragma once
#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "attnjit/error.hpp"
#include "attnjit/tensor.hpp"

namespace attnjit::detail {

enum class Placement { kHost, kDevice };  // reference plans take host tensors, kernel plans CUDA ones

class ArgChecker {
 public:
  ArgChecker(std::string_view op, const TensorArgs& args, Placement placement)
      : op_(op), args_(args), placement_(placement) {}

  template <typename... A>
  [[noreturn]] void fail(std::string_view category, std::string_view arg, fmt::format_string<A...> f, A&&... a) const {
    throw InvalidArgument(fmt::format("{}: {}: {}: {}", op_, category, arg, fmt::format(f, std::forward<A>(a)...)));
  }

  // Every passed tensor's name must be one of `known`.
  void only_known(std::initializer_list<std::string_view> known) const;
  const TensorRef& required(std::string_view name) const;
  const TensorRef* optional(std::string_view name) const { return args_.find(name); }
  // "present iff": an optional input that must be given exactly when `needed` (reason says when).
  const TensorRef* required_iff(std::string_view name, bool needed, std::string_view reason) const;

  // Rank and extents; `dims` names the expected shape for messages, e.g. "[N, H_kv, D]".
  void rank(std::string_view name, const TensorRef& t, int ndim, std::string_view dims) const;
  void extent(std::string_view name, const TensorRef& t, int dim, int64_t expected, std::string_view what) const;
  void dtype_in(std::string_view name, const TensorRef& t, std::initializer_list<DType> allowed) const;
  void dtype_is(std::string_view name, const TensorRef& t, DType expected, std::string_view why = {}) const;

  // Layout classes of SPEC.md §1.2. Alignment is checked for device plans only (host: element size).
  void feature(std::string_view name, const TensorRef& t, bool read_only) const;  // F (and W: read_only=false)
  void metadata(std::string_view name, const TensorRef& t) const;               // M
  // C: dense row-major, base aligned to the element size (16 bytes when `align16`).
  void contiguous(std::string_view name, const TensorRef& t, bool align16) const;
  // O: class C with a 16-byte aligned base, not overlapping `others` (name, tensor) pairs.
  void output(std::string_view name, const TensorRef& t,
              std::initializer_list<std::pair<std::string_view, const TensorRef*>> others) const;
  // Placement (host or device) and one device for all tensors passed so far.
  void device(std::string_view name, const TensorRef& t);
  Device call_device() const { return device_; }

  std::string_view op() const { return op_; }

 private:
  std::string_view op_;
  const TensorArgs& args_;
  Placement placement_;
  Device device_{};
  bool have_device_ = false;
};

}  // namespace attnjit::detail
