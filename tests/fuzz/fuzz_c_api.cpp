// libFuzzer target over the C ABI: op name, config JSON and tensor descriptors decoded from the input,
// through attnjit_run or plan_create + plan_execute + plan_destroy, with impl reference (host buffers
// sized exactly to each descriptor's span, so AddressSanitizer catches any access outside it) or impl
// kernel (no JIT and no driver: descriptor checks only, fake device addresses never dereferenced).
// Input layout: see Reader below; any byte string is a valid input.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "attnjit/attnjit.h"

namespace {

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= uint32_t{u8()} << (8 * k);
    return v;
  }
  uint64_t u64() { return uint64_t{u32()} | (uint64_t{u32()} << 32); }
  std::string str(size_t max) {
    size_t len = u8() | (size_t{u8()} << 8);
    if (len > max) len = max;
    std::string s;
    while (len-- && i_ < n_) s.push_back(static_cast<char>(d_[i_++]));
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

const char* const kOps[] = {"paged_kv_write",       "gqa_fwd",           "gqa_varlen_fwd", "gqa_paged_fwd",
                            "mha_decode_paged",     "gqa_prefill_paged_append", "fp8_lightning_indexer",
                            "topk_select",          "lightning_indexer", "bsa_bwd",        "bsa_fwd",
                            "bsa_fp8_fwd",          "no_such_op"};
const char* const kNames[] = {"block_sizes", "block_table", "cache_seqlens", "cu_seqlen_ke", "cu_seqlen_ks",
                              "cu_seqlens", "cu_seqlens_k", "cu_seqlens_kv", "cu_seqlens_q", "dk", "do", "dq",
                              "dv", "ends", "index_k", "index_k_scale", "index_q", "index_score", "indexes",
                              "indices", "k", "k_new", "k_pages", "k_scale", "logits", "lse", "o", "q",
                              "q2k_block_index", "q2k_block_nums", "q_scale", "rope_cos", "rope_sin", "sinks",
                              "slot_mapping", "starts", "v", "v_new", "v_pages", "v_scale", "weights", "bogus"};
const int64_t kExtents[] = {0, 1, 2, 3, 4, 7, 8, 16, 64, 128, 65, -1, int64_t{1} << 31, int64_t{1} << 40,
                            int64_t{1} << 62, INT64_MAX};
const DLDataType kDtypes[] = {{kDLFloat, 16, 1}, {kDLBfloat, 16, 1}, {kDLFloat, 32, 1}, {kDLInt, 32, 1},
                              {kDLInt, 64, 1},   {10, 8, 1},         {kDLFloat, 64, 1}, {kDLFloat, 16, 4}};
const int32_t kDevices[] = {kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged, 1234, -1, kDLOpenCL};

attnjit_runtime* runtime() {
  static attnjit_runtime* rt = [] {
    attnjit_runtime* r = nullptr;
    attnjit_runtime_create(R"({"cache_disabled": true, "no_jit": true, "log_level": "off", "arch": "sm_90a"})", &r);
    return r;
  }();
  return rt;
}

int64_t element_bytes(const DLDataType& dt) { return dt.bits >= 8 ? dt.bits / 8 : 1; }

// The bytes a descriptor spans, or -1 when that does not fit (the library must reject those).
int64_t span_bytes(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > 8) return -1;
  int64_t span = 1, stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] < 0) return -1;
    if (t.shape[d] == 0) return 0;
    const int64_t s = t.strides ? t.strides[d] : stride;
    int64_t term = 0;
    if (s < 0 || __builtin_mul_overflow(t.shape[d] - 1, s, &term) || __builtin_add_overflow(span, term, &span)) return -1;
    if (!t.strides && __builtin_mul_overflow(stride, t.shape[d], &stride)) return -1;
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(span, element_bytes(t.dtype) * t.dtype.lanes, &bytes)) return -1;
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  attnjit_runtime* rt = runtime();
  if (!rt) return 0;
  const uint8_t mode = r.u8();
  const bool reference = mode & 1;
  const char* op = kOps[r.u8() % (sizeof kOps / sizeof kOps[0])];
  std::string config = r.str(4096);
  if (mode & 2) {
    // Splice impl into an object config so that most inputs reach the op's own checks.
    const std::string impl = reference ? R"("impl": "reference")" : R"("impl": "kernel")";
    config = config.empty() || config[0] != '{' ? "{" + impl + "}" : "{" + impl + (config.size() > 2 ? "," : "") + config.substr(1);
  }
  const int n = r.u8() % 10;
  std::vector<DLTensor> tensors(n);
  std::vector<std::vector<int64_t>> shapes(n), strides(n);
  std::vector<std::vector<uint8_t>> buffers(n);
  std::vector<const char*> names(n);
  for (int i = 0; i < n; ++i) {
    DLTensor& t = tensors[i];
    std::memset(&t, 0, sizeof t);
    names[i] = kNames[r.u8() % (sizeof kNames / sizeof kNames[0])];
    const uint8_t flags = r.u8();
    t.ndim = (flags & 0x80) ? static_cast<int>(static_cast<int8_t>(r.u8())) : r.u8() % 6;
    const int dims = t.ndim > 0 && t.ndim <= 64 ? t.ndim : 0;
    shapes[i].resize(dims);
    for (auto& e : shapes[i]) {
      const uint8_t b = r.u8();
      e = b < 200 ? b % 9 : kExtents[b % (sizeof kExtents / sizeof kExtents[0])];
    }
    t.shape = (flags & 1) && t.ndim > 0 ? nullptr : shapes[i].data();
    if (flags & 2) {
      strides[i].resize(dims);
      for (auto& s : strides[i]) {
        const uint8_t b = r.u8();
        s = b < 200 ? b % 130 : kExtents[b % (sizeof kExtents / sizeof kExtents[0])];
      }
      t.strides = strides[i].data();
    }
    t.dtype = kDtypes[r.u8() % (sizeof kDtypes / sizeof kDtypes[0])];
    int32_t dev = reference ? kDLCPU : kDLCUDA;
    if (flags & 4) dev = kDevices[r.u8() % (sizeof kDevices / sizeof kDevices[0])];
    std::memcpy(&t.device.device_type, &dev, sizeof dev);
    t.device.device_id = (flags & 8) ? static_cast<int32_t>(r.u32()) : 0;
    if (flags & 16) t.byte_offset = (flags & 32) ? r.u64() : r.u8();
    const int64_t bytes = t.shape || t.ndim <= 0 ? span_bytes(t) : -1;
    if (flags & 64) {
      t.data = nullptr;
    } else if (dev == kDLCPU || dev == kDLCUDAHost || dev == kDLCUDAManaged) {
      // Host memory (as far as the reference can tell): exactly the span, or NULL when it is too big.
      if (bytes >= 0 && bytes <= (1 << 20) && t.byte_offset <= 64) {
        // NOTE: zeros keep index inputs (slots, pages, offsets, windows) inside the caller contract that
        // only validate_inputs checks, so a finding is the library's, not a contract the harness broke.
        buffers[i].assign(static_cast<size_t>(bytes + 64), 0);
        // byte_offset moves the start inside the allocation; the end stays the span's end.
        t.data = buffers[i].data() + 64 - t.byte_offset;
      } else if (bytes < 0) {
        // A span that overflows must be rejected before any access, so a bogus address is safe here.
        t.data = reinterpret_cast<void*>(uintptr_t{0x100000});
      } else {
        t.data = nullptr;  // too big to back with memory: a real address would be read
      }
    } else {
      t.data = reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + (uintptr_t{r.u8()} << 24));
    }
  }
  const uint8_t how = r.u8() % 3;
  void* stream = nullptr;
  if (how == 0) {
    attnjit_run(rt, op, config.c_str(), n, names.data(), tensors.data(), stream);
  } else {
    attnjit_plan* plan = nullptr;
    if (attnjit_plan_create(rt, op, config.c_str(), n, names.data(), tensors.data(), &plan) == ATTNJIT_OK) {
      attnjit_plan_execute(plan, n, names.data(), tensors.data(), stream);
      attnjit_plan_destroy(plan);
      if (how == 2) attnjit_plan_destroy(plan);  // a second destroy is detected and ignored
    }
  }
#ifdef ATTNJIT_FUZZ_VERBOSE  // to see what a seed reaches: -DATTNJIT_FUZZ_VERBOSE
  std::fprintf(stderr, "%s (%d tensors): %s\n", op, n, attnjit_last_error());
#endif
  (void)attnjit_last_error();
  return 0;
}
