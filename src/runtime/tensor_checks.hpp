// Checks every API entry runs before anything dereferences a caller's descriptor or config: DLTensor
// fields (null pointers, rank bound, device type, byte offset), tensor geometry (element counts and
// bytes spanned fit int64, with checked arithmetic), duplicate names, and JSON depth and size limits.
// Errors are InvalidArgument in SPEC.md §1.11's form "<op>: <category>: <argument>: expected ..., got
// ..."; with an empty op the form is "<argument>: <category>: expected ..., got ..." (TensorRef::from_dlpack).
#pragma once
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "attnjit/tensor.hpp"

namespace attnjit::detail {

// Largest nesting depth and text size accepted for config and options JSON (far above any real config,
// far below what a recursive walk of the value can survive).
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::size_t kMaxJsonBytes = 1u << 20;

// Validates and converts one DLTensor; never reads through t.shape or t.strides before checking them.
TensorRef checked_from_dlpack(const DLTensor& t, std::string_view op, std::string_view name);

// The geometry rules every tensor at an entry point obeys: 0 <= ndim <= kMaxDims, extents and strides
// >= 0, the element count and the bytes spanned fit int64 (and the address range does not wrap), and
// a non-NULL base when the tensor has elements. Returns the category and the message tail of the first
// rule broken, or nullopt; allocates only on failure.
struct TensorProblem {
  std::string category;
  std::string message;  // "expected ..., got ..."
};
std::optional<TensorProblem> tensor_problem(const TensorRef& t);

// Throws InvalidArgument "<op>: <category>: <name>: ..." for the first tensor of `args` that breaks a
// rule of tensor_problem(). `op` is only formatted on failure.
void check_tensor_args(const TensorArgs& args, std::string_view op);

// Turns a std::bad_alloc raised while planning or running a call into InvalidArgument naming the call's
// shapes: "<op>: shape: tensors: expected shapes whose working memory can be allocated, got q [..], ...".
[[noreturn]] void throw_allocation_failure(const TensorArgs& args, std::string_view op);

// Inside a catch block: rethrows the current InvalidArgument or Unsupported with SPEC.md's "<op>: "
// prefix, replacing another op's name where a shared helper used it (e.g. gqa_paged_fwd's config parsed
// by the gqa parser); anything else is rethrown unchanged.
[[noreturn]] void rethrow_with_op(std::string_view op);

// Rejects a JSON text nested deeper than kMaxJsonDepth or larger than kMaxJsonBytes before it is parsed
// (`what` names the argument, e.g. "config_json"). Brackets inside strings do not count.
void check_json_text(std::string_view text, std::string_view what);
// The same limits for an already-built JSON value (C++ callers), walked without recursion.
void check_json_value(const nlohmann::json& j, std::string_view what);

// Checked int64 arithmetic: false on overflow.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace attnjit::detail
