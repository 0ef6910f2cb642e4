// JSON test cases for `attnjit test` (format documented in the README, "JSON test cases").
//
// A file holds one case object or {"cases": [ ... ]}. A case:
//   {"name": "...", "op": "paged_kv_write", "config": {...}, "seed": 1,
//    "tensors": {"<arg>": {"shape": [...], "dtype": "bf16", "strides": [...]?, "init": {...}, "output": bool?}},
//    "compare": {"<arg>": {"mode": "bitwise"} | {"mode": "rel_l2", "tol": 1e-2} | {"mode": "lse"}
//                        | {"mode": "topk", "ascending": bool?} | {"mode": "ulp", "max_ulp": 2}
//                        | {"mode": "grad", "tol": 2e-2}},
//      grad (gradients, SPEC.md §1.12): ||out - ref|| / max(||ref||, 1e-3 ||ref_abs||) <= tol, ref_abs being
//      the op's reference on the absolute values of every product it sums (ops with one: gqa_bwd), NaN
//      fails; no exact-zero-row rule (a gradient cancels to zero without the contract making it zero);
//      rel_l2: ||out - ref|| / ||ref|| <= tol, NaN fails, and every row (innermost axis) the reference
//      makes all exact zeros (rows the contract makes zero) must be exact zeros; lse: |out - ref| <= 2e-3 * max(1, |ref|) where ref is
//      finite, +-inf must match exactly (SPEC.md §1.12); ulp (fp16, bf16, e4m3, fp32): every storage element
//      (gaps included) within max_ulp units in the last place of the stored dtype at the reference value,
//      |out - ref| / ulp(ref) with ulp(0) the smallest subnormal; NaN and +-inf must match bitwise, so
//      poisoned bytes the op must leave alone still have to be identical (e.g. pools appended with RoPE).
//    "golden": {"<arg>": {"bits": [...]} | {"values": [...]}},        (optional; expected reference output)
//    "expect_error": {"category": "dtype", "contains": "slot_mapping"}, (optional; a rejected call)
//    "gpu_only": bool?,  (the case concerns the kernel path only: error cases skip the reference)
//    "repeat": bool?,    (a second run must give byte-identical outputs)
//    "kernel_unsupported": "text"?}  (the kernel impl must refuse the call with Unsupported containing it)
//      topk: index outputs checked by SPEC.md §1.9's rule against the op's scorer (tools/cli/topk_check.hpp);
//      golden/reference outputs are checked by the same rule (ties may go either way).
// Init kinds: normal {mean, std, specials?}, uniform {low, high}, values {values}, bits {bits},
// bytes {pattern?} (random bytes, or one repeated byte), poison (NaN / 0x7FFFFFFF), slots {capacity, skip},
// rows {ranges: [[first, count], ...], init: {...}, else: {...}} (the listed dim-0 rows take `init`, the rest
// of the storage `else`, default poison; e.g. a page pool with random cached rows and a poisoned remainder).
// Init covers the tensor's whole storage (gaps between strided rows too), so "bitwise" compares also
// prove that nothing outside the op's rows was written.
// "setup": [{"op": "bsa_fwd", "config": {...}, "tensors": {"<setup arg>": "<case tensor>", ...}}, ...]
//   (optional; compare cases only): after the inits, each entry runs its op's CPU reference on the case's
//   host tensors (mapped by name; the setup op's outputs are written into the named case tensors), in
//   order, before anything else. Inputs that are another op's results (e.g. bsa_bwd's o and lse from the
//   forward) come from that op's reference this way instead of being stored in the file.
#pragma once
#include <attnjit/tensor.hpp>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace attnjit::cli {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements; empty = contiguous
  nlohmann::json init;
  bool output = false;

  int64_t storage_elements() const;  // 1 + sum((shape - 1) * stride), 0 for an empty tensor
  std::vector<int64_t> resolved_strides() const;
};

struct CompareSpec {
  std::string mode;  // "bitwise" | "rel_l2" | "grad" | "lse" | "topk" | "ulp" | "masked_nse"
  double tol = 0;
  double max_ulp = 0;  // ulp: the largest accepted |out - ref| in units of the stored dtype's ulp at ref
  // topk (index outputs, SPEC.md §1.9 via the op's scorer in tools/cli/topk_check.cpp): also require the
  // valid entries of every row to be strictly ascending (deterministic modes).
  bool ascending = false;
};

struct ExpectedError {
  std::string category;  // "shape", "dtype", "device", "layout", "param", "args", "content", "unsupported"
  std::string contains;
};

struct TestCase {
  std::string name;
  std::string file;
  std::string op;
  nlohmann::json config = nlohmann::json::object();
  uint64_t seed = 0;
  std::vector<TensorSpec> tensors;
  std::map<std::string, CompareSpec> compare;
  nlohmann::json golden;  // null when absent
  std::optional<ExpectedError> expect_error;
  // The case concerns the kernel path only (e.g. a device alignment rule the host reference does not
  // have): error cases skip the reference's rejection check.
  bool gpu_only = false;
  // Run the op a second time on the same inputs (outputs poisoned again) and require byte-identical
  // outputs (deterministic modes): the kernel on a GPU, the reference without one.
  bool repeat = false;
  // Reference runs of other ops that fill some of the case's tensors (null when absent).
  nlohmann::json setup;
  // Non-empty: the kernel impl must refuse the call with Unsupported, its message containing this text (a
  // configuration only the reference serves, e.g. nsa_compressed_fwd with DK != DV); the reference is
  // still compared with the golden values.
  std::string kernel_unsupported;
};

// Throws std::runtime_error naming the file and case on a malformed case.
std::vector<TestCase> load_test_cases(const std::string& path);
// The same for a file's text (`path` names it in messages); the fuzz target over case files calls it.
std::vector<TestCase> parse_test_cases(const std::string& text, const std::string& path);

// Host storage of one tensor, filled as its init says (deterministic in seed and tensor name).
struct HostTensor {
  const TensorSpec* spec = nullptr;
  std::vector<uint8_t> bytes;
  TensorRef ref(void* data, Device device) const;
};
HostTensor make_host_tensor(const TensorSpec& spec, uint64_t seed);

// ||a - b|| / ||b|| over the logical elements (NaN anywhere gives +inf).
double rel_l2(const HostTensor& a, const HostTensor& b);
// Compare mode "grad": ||a - b|| / max(||b||, 1e-3 ||abs||), abs the absolute-value reference of b.
double grad_rel_l2(const HostTensor& a, const HostTensor& b, const HostTensor& abs);
// Largest |out - ref| / max(1, |ref|) over finite ref entries; +inf when an infinity or NaN differs.
// `where` gets the worst element.
double lse_error(const HostTensor& out, const HostTensor& ref, std::string* where);
// Rows (innermost axis) that the reference makes all exact zeros must be all exact zeros in out.
bool zeros_match(const HostTensor& out, const HostTensor& ref, std::string* where);
// Compare mode "masked_nse" (fp8_lightning_indexer's logits, SPEC.md §2.3): elements where ref is NaN
// are not compared (regions the op leaves unspecified keep the reference's poison); where ref is +-inf
// (the -inf outside windows with clean_logits) out must be the same infinity; over the finite ref
// elements out must be finite and sum((out - ref)^2) / sum(ref^2) <= tol (all-zero ref: out exact).
// Returns the normalised squared error (+inf on a pattern mismatch); `where` gets the first mismatch.
double masked_nse(const HostTensor& out, const HostTensor& ref, std::string* where);
// Byte-for-byte equality of the whole storage; on failure `where` gets the first differing element.
bool bitwise_equal(const HostTensor& a, const HostTensor& b, std::string* where);
// Largest |out - ref| / ulp(ref) over every storage element (fp16, bf16, e4m3, fp32): ulp(ref) is the spacing
// of the stored dtype at |ref| (the smallest subnormal at 0); elements with identical bits count 0; a NaN or
// an infinity on either side that is not bitwise identical gives +inf. `where` gets the worst element.
double ulp_error(const HostTensor& out, const HostTensor& ref, std::string* where);
// The case's config with "impl" set to `impl` unless it names one.
nlohmann::json with_impl(const nlohmann::json& config, const char* impl);
// The case's tensors as CUDA tensors at fake, distinct, 256-aligned addresses: for compile-only validation
// (OpInstance::kernels_for), never dereferenced.
TensorArgs descriptor_args(const TestCase& c);

// A HostTensor holding the golden bits/values of `spec`.
HostTensor golden_tensor(const TensorSpec& spec, const nlohmann::json& golden);

}  // namespace attnjit::cli
