#include "jit/kernel_cache.hpp"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <regex>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/sha256.hpp"
#include "base/logging.hpp"

namespace attnjit::jit {

namespace {

// Registers and spill bytes from ptxas -v lines in the NVRTC log.
nlohmann::json resources_from_log(const std::string& log) {
  nlohmann::json r = nlohmann::json::object();
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"(Used (\d+) registers)"))) r["registers"] = std::stoi(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes spill stores)"))) r["spill_store_bytes"] = std::stoi(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes stack frame)"))) r["stack_frame_bytes"] = std::stoi(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes smem)"))) r["static_smem_bytes"] = std::stoi(m[1]);
  return r;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

std::shared_ptr<const CompiledKernel> KernelCache::from_disk(const KernelSpec& spec, const KernelKey& key) {
  auto entry = disk_->load(key.hex);
  if (!entry) return nullptr;
  auto k = std::make_shared<CompiledKernel>();
  k->spec = spec;
  k->key = key;
  k->cubin = std::move(entry->cubin);
  k->lowered_name = entry->manifest.value("lowered_name", "");
  k->manifest = std::move(entry->manifest);
  k->from_disk = true;
  if (!k->lowered_name.empty()) return k;
  disk_->remove(key.hex);
  return nullptr;
}

KernelCache::KernelCache(KernelCacheSettings settings)
    : settings_(std::move(settings)), compiler_(settings_.compile), nvrtc_version_(NvrtcCompiler::version()) {
  if (settings_.disk) disk_ = std::make_unique<DiskCache>(*settings_.disk);
}

KernelCache::~KernelCache() {
  // NOTE: modules are not unloaded: plans may outlive the cache inside static objects, and the
  // primary context owns them until process exit.
}

KernelKey KernelCache::key_of(const KernelSpec& spec) const {
  return make_kernel_key(spec, compiler_.key_options(spec), nvrtc_version_);
}

std::shared_ptr<const CompiledKernel> KernelCache::compile_or_load(const KernelSpec& spec, const KernelKey& key,
                                                                   bool skip_disk) {
  if (disk_ && !skip_disk) {
    if (auto k = from_disk(spec, key)) return k;
  }
  if (settings_.no_jit) {
    throw CacheError(fmt::format(
        "kernel {} (key {}) is not in the cache and ATTNJIT_NO_JIT forbids compiling it; fill the cache "
        "first with `attnjit warmup --arch {}`",
        spec.describe(), key.hex.substr(0, 16), spec.arch));
  }
  std::unique_ptr<KeyLock> lock;
  if (disk_ && !skip_disk) {
    lock = disk_->lock(key.hex);
    // NOTE: another process may have published while we waited for the lock.
    if (lock) {
      if (auto k = from_disk(spec, key)) return k;
    }
  }
  CompileResult r = compiler_.compile(spec);
  auto k = std::make_shared<CompiledKernel>();
  k->spec = spec;
  k->key = key;
  k->cubin = std::move(r.cubin);
  k->lowered_name = r.lowered_name;
  k->compile_seconds = r.seconds;
  k->manifest = {
      {"key", key.hex},
      {"key_serialisation", key.serialisation},
      {"describe", spec.describe()},
      {"entry", spec.entry},
      {"lowered_name", r.lowered_name},
      {"nvrtc_log", r.log},
      {"resources", resources_from_log(r.log)},
      {"compile_seconds", r.seconds},
      {"created", utc_now()},
      {"cubin_bytes", k->cubin.size()},
      {"cubin_sha256", sha256_hex(k->cubin)},
  };
  if (disk_) disk_->publish(CacheEntry{key.hex, k->cubin, k->manifest});
  return k;
}

std::shared_ptr<const CompiledKernel> KernelCache::compiled(const KernelSpec& spec) {
  KernelKey key = key_of(spec);
  std::promise<std::shared_ptr<const CompiledKernel>> promise;
  std::shared_future<std::shared_ptr<const CompiledKernel>> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = compiled_.find(key.hex);
    if (it != compiled_.end()) {
      future = it->second;
    } else {
      future = promise.get_future().share();
      compiled_.emplace(key.hex, future);
      owner = true;
    }
  }
  if (!owner) return future.get();  // waits for the owner; rethrows its error
  try {
    promise.set_value(compile_or_load(spec, key, /*skip_disk=*/false));
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> g(mutex_);
    compiled_.erase(key.hex);  // a failure is not cached: a later call tries again
  }
  return future.get();
}

std::shared_ptr<const LoadedKernel> KernelCache::loaded(const KernelSpec& spec, int device) {
  auto c = compiled(spec);
  {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = loaded_.find({c->key.hex, device});
    if (it != loaded_.end()) return it->second;
  }
  const CudaDriver& drv = CudaDriver::get();
  drv.require(spec.describe().c_str());
  drv.bind_device(device);
  CUmodule module = nullptr;
  CUresult r = drv.cuModuleLoadData(&module, c->cubin.data());
  if (r != CUDA_SUCCESS && c->from_disk) {
    logger().warn("cached cubin of {} failed to load; dropping the entry and recompiling", spec.describe());
    if (disk_) disk_->remove(c->key.hex);
    auto fresh = compile_or_load(spec, c->key, /*skip_disk=*/true);
    if (disk_) disk_->publish(CacheEntry{fresh->key.hex, fresh->cubin, fresh->manifest});
    {
      std::lock_guard<std::mutex> g(mutex_);
      std::promise<std::shared_ptr<const CompiledKernel>> p;
      p.set_value(fresh);
      compiled_[c->key.hex] = p.get_future().share();
    }
    c = fresh;
    r = drv.cuModuleLoadData(&module, c->cubin.data());
  }
  drv.check(r, fmt::format("cuModuleLoadData({})", spec.describe()).c_str());
  auto k = std::make_shared<LoadedKernel>();
  k->compiled = c;
  k->device = device;
  k->module = module;
  drv.check(drv.cuModuleGetFunction(&k->function, module, c->lowered_name.c_str()), "cuModuleGetFunction");
  drv.check(drv.cuFuncGetAttribute(&k->num_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->function), "cuFuncGetAttribute");
  drv.check(drv.cuFuncGetAttribute(&k->max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->function),
            "cuFuncGetAttribute");
  drv.check(drv.cuFuncGetAttribute(&k->static_smem_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function),
            "cuFuncGetAttribute");
  CUdevice dev{};
  drv.check(drv.cuDeviceGet(&dev, device), "cuDeviceGet");
  int optin = 0;
  drv.check(drv.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
            "cuDeviceGetAttribute");
  k->max_dynamic_smem_bytes = optin - k->static_smem_bytes;
  std::lock_guard<std::mutex> g(mutex_);
  auto [it, inserted] = loaded_.emplace(std::make_pair(c->key.hex, device), k);
  if (!inserted) drv.cuModuleUnload(module);  // another thread loaded it first
  return it->second;
}

}  // namespace attnjit::jit
