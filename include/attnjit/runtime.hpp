// attnjit: the runtime. Owns the NVRTC compiler, the disk cache of cubins, loaded kernels per
// device, and the op instances built from (op name, config JSON).
#pragma once
#include <attnjit/export.hpp>
#include <attnjit/config.hpp>
#include <attnjit/error.hpp>
#include <attnjit/plan.hpp>
#include <attnjit/tensor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit {

// Every knob of the runtime. from_env() reads the ATTNJIT_* variables (listed in the README) in one
// place; code may then override any field.
struct ATTNJIT_API RuntimeOptions {
  std::string cache_dir;                  // ATTNJIT_CACHE_DIR; empty: $XDG_CACHE_HOME/attnjit, ~/.cache/attnjit
  bool cache_read_only = false;           // ATTNJIT_CACHE_READONLY: load entries, never write
  bool cache_disabled = false;            // ATTNJIT_CACHE_DISABLE: no disk cache at all (memory only)
  std::uint64_t cache_max_bytes = 4ull << 30;  // ATTNJIT_CACHE_MAX_BYTES: LRU cap; 0 = unlimited
  std::string lock_dir;                   // ATTNJIT_LOCK_DIR: per-key compile locks (node-local disk)
  int lock_timeout_ms = 60000;            // ATTNJIT_LOCK_TIMEOUT_MS
  bool no_jit = false;                    // ATTNJIT_NO_JIT: a cache miss is an error naming `attnjit warmup`
  std::string dump_sources_dir;           // ATTNJIT_DUMP_SOURCES: write each compiled source there
  bool lineinfo = false;                  // ATTNJIT_LINEINFO: compile with -lineinfo (changes the key)
  std::string log_level = "warn";         // ATTNJIT_LOG_LEVEL: trace, debug, info, warn, error, off
  std::string arch;                       // ATTNJIT_ARCH: compile target; empty: the device's, else sm_90a
  // Tuning overrides of the planners' choices (measurement and tests): keys gqa_tile ("BMxBNxWARPS"),
  // decode_tile ("BNxWARPS"), decode_splits (count) and li_force_slab (bool), applied over the
  // ATTNJIT_TUNE_GQA_TILE, ATTNJIT_TUNE_DECODE_TILE, ATTNJIT_TUNE_DECODE_SPLITS and
  // ATTNJIT_TUNE_LI_FORCE_SLAB variables when the runtime is created (the README lists their values).
  // A JSON object, as text (the public API carries no JSON library's types), e.g. {"gqa_tile": "128x32x4"}.
  std::string tune = "{}";

  static RuntimeOptions from_env();
  // Applies the keys of a JSON object (text) with the field names above (the C ABI's options_json);
  // "" and "null" change nothing.
  static RuntimeOptions from_json(std::string_view json, RuntimeOptions base = from_env());
  // The directory actually used (after the defaults above).
  std::string resolved_cache_dir() const;
};

namespace detail {
class RuntimeImpl;
class OpInstance;
}

// One op instance: an op name plus its construction-time parameters (SPEC.md's parameter table, and
// "impl": "kernel" | "reference", "backend": "auto" | "portable" | "hopper"). Construction checks run
// when it is created. It keeps a map from static signature to plan, so plan() for a signature already
// seen is a lookup.
class ATTNJIT_API Op {
 public:
  Op() = default;
  explicit Op(std::shared_ptr<detail::OpInstance> impl) : impl_(std::move(impl)) {}
  Plan plan(const TensorArgs& tensors) const;
  // As plan(tensors), but never allocates device scratch: the plan records what these shapes need
  // (Plan::workspace_bytes()) and runs on `workspace` (device memory of at least that many bytes,
  // 256-byte aligned), or on a buffer bound later with Plan::set_workspace when `workspace` is null.
  // Throws InvalidArgument when a given buffer is too small.
  Plan plan(const TensorArgs& tensors, void* workspace, std::size_t workspace_bytes) const;
  void run(const TensorArgs& tensors, void* stream = nullptr) const { plan(tensors).execute(tensors, stream); }
  const std::string& name() const;

 private:
  std::shared_ptr<detail::OpInstance> impl_;
};

class ATTNJIT_API Runtime {
 public:
  explicit Runtime(RuntimeOptions options = RuntimeOptions::from_env());
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeOptions& options() const;

  // An op instance; instances are cached by (name, canonical config), so asking twice is cheap.
  Op op(std::string_view name, const Config& config = {});
  Plan plan(std::string_view name, const Config& config, const TensorArgs& tensors) {
    return op(name, config).plan(tensors);
  }
  void run(std::string_view name, const Config& config, const TensorArgs& tensors, void* stream = nullptr) {
    op(name, config).run(tensors, stream);
  }

  // The ops this build knows, by SPEC.md name.
  static std::vector<std::string> op_names();

  detail::RuntimeImpl& impl() { return *impl_; }

 private:
  std::shared_ptr<detail::RuntimeImpl> impl_;
};

// Library version string ("0.1.0").
ATTNJIT_API const char* version();

}  // namespace attnjit
