// In-process kernel cache: KernelSpec -> compiled cubin (memory, then disk, then NVRTC; one compile
// per key however many threads ask) -> loaded CUfunction per device (behind a mutex).
#pragma once
#include <cuda.h>

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "jit/disk_cache.hpp"
#include "jit/kernel_key.hpp"
#include "jit/kernel_spec.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace attnjit::jit {

struct CompiledKernel {
  KernelSpec spec;
  KernelKey key;
  std::string cubin;
  std::string lowered_name;
  nlohmann::json manifest;
  bool from_disk = false;
  double compile_seconds = 0;  // 0 when loaded from disk
};

struct LoadedKernel {
  std::shared_ptr<const CompiledKernel> compiled;
  int device = 0;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int num_regs = 0;
  int max_threads_per_block = 0;
  int static_smem_bytes = 0;
  int max_dynamic_smem_bytes = 0;  // what the device allows this kernel to opt into
};

struct KernelCacheSettings {
  std::optional<DiskCache::Settings> disk;  // nullopt: no disk cache
  bool no_jit = false;
  CompileSettings compile;
};

class KernelCache {
 public:
  explicit KernelCache(KernelCacheSettings settings);
  ~KernelCache();

  KernelKey key_of(const KernelSpec& spec) const;
  // Memory -> disk -> NVRTC. Throws CompileError, or CacheError in no-JIT mode on a miss.
  std::shared_ptr<const CompiledKernel> compiled(const KernelSpec& spec);
  // compiled(), then cuModuleLoadData on `device` (once per key and device). A cubin from disk that
  // fails to load is dropped from disk and rebuilt once.
  std::shared_ptr<const LoadedKernel> loaded(const KernelSpec& spec, int device);

  DiskCache* disk() { return disk_.get(); }

 private:
  std::shared_ptr<const CompiledKernel> compile_or_load(const KernelSpec& spec, const KernelKey& key,
                                                        bool skip_disk);
  std::shared_ptr<const CompiledKernel> from_disk(const KernelSpec& spec, const KernelKey& key);

  KernelCacheSettings settings_;
  NvrtcCompiler compiler_;
  std::unique_ptr<DiskCache> disk_;
  std::string nvrtc_version_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<const CompiledKernel>>> compiled_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const LoadedKernel>> loaded_;
};

}  // namespace attnjit::jit
