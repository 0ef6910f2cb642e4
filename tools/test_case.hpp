// JSON test cases for `attnjit test` (format documented in the README, "JSON test cases").
//
// A file holds one case object or {"cases": [ ... ]}. A case:
//   {"name": "...", "op": "paged_kv_write", "config": {...}, "seed": 1,
//    "tensors": {"<arg>": {"shape": [...], "dtype": "bf16", "strides": [...]?, "init": {...}, "output": bool?}},
//    "compare": {"<arg>": {"mode": "bitwise"} | {"mode": "rel_l2", "tol": 1e-2} | {"mode": "lse"}},
//      rel_l2: ||out - ref|| / ||ref|| <= tol, NaN fails, and every row (innermost axis) the reference
//      makes all exact zeros (rows the contract makes zero) must be exact zeros; lse: |out - ref| <= 2e-3 * max(1, |ref|) where ref is
//      finite, +-inf must match exactly (SPEC.md §1.12).
//    "golden": {"<arg>": {"bits": [...]} | {"values": [...]}},        (optional; expected reference output)
//    "expect_error": {"category": "dtype", "contains": "slot_mapping"}, (optional; a rejected call)
//    "gpu_only": bool?}  (the case concerns the kernel path only: error cases skip the reference)
// Init kinds: normal {mean, std, specials?}, uniform {low, high}, values {values}, bits {bits},
// bytes {pattern?} (random bytes, or one repeated byte), poison (NaN / 0x7FFFFFFF), slots {capacity, skip}.
// Init covers the tensor's whole storage (gaps between strided rows too), so "bitwise" compares also
// prove that nothing outside the op's rows was written.
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
  std::string mode;  // "bitwise" | "rel_l2" | "lse"
  double tol = 0;
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
};

// Throws std::runtime_error naming the file and case on a malformed case.
std::vector<TestCase> load_test_cases(const std::string& path);

// Host storage of one tensor, filled as its init says (deterministic in seed and tensor name).
struct HostTensor {
  const TensorSpec* spec = nullptr;
  std::vector<uint8_t> bytes;
  TensorRef ref(void* data, Device device) const;
};
HostTensor make_host_tensor(const TensorSpec& spec, uint64_t seed);

// ||a - b|| / ||b|| over the logical elements (NaN anywhere gives +inf).
double rel_l2(const HostTensor& a, const HostTensor& b);
// Largest |out - ref| / max(1, |ref|) over finite ref entries; +inf when an infinity or NaN differs.
// `where` gets the worst element.
double lse_error(const HostTensor& out, const HostTensor& ref, std::string* where);
// Rows (innermost axis) that the reference makes all exact zeros must be all exact zeros in out.
bool zeros_match(const HostTensor& out, const HostTensor& ref, std::string* where);
// Byte-for-byte equality of the whole storage; on failure `where` gets the first differing element.
bool bitwise_equal(const HostTensor& a, const HostTensor& b, std::string* where);
// A HostTensor holding the golden bits/values of `spec`.
HostTensor golden_tensor(const TensorSpec& spec, const nlohmann::json& golden);

}  // namespace attnjit::cli
