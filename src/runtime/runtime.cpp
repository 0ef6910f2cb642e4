#include <fmt/format.h>

#include "attnjit/runtime.hpp"
#include "jit/cuda_driver.hpp"
#include "base/logging.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/tensor_checks.hpp"
#include "ops/base/workspace.hpp"

namespace attnjit {

namespace detail {

namespace {
jit::KernelCacheSettings cache_settings(const RuntimeOptions& o) {
  jit::KernelCacheSettings s;
  if (!o.cache_disabled) {
    jit::DiskCache::Settings d;
    d.dir = o.resolved_cache_dir();
    d.read_only = o.cache_read_only;
    d.max_bytes = o.cache_max_bytes;
    d.lock_dir = o.lock_dir;
    d.lock_timeout_ms = o.lock_timeout_ms;
    s.disk = d;
  }
  s.no_jit = o.no_jit;
  s.compile.lineinfo = o.lineinfo;
  s.compile.dump_sources_dir = o.dump_sources_dir;
  return s;
}
}  // namespace

RuntimeImpl::RuntimeImpl(RuntimeOptions options)
    : options_(std::move(options)), tuning_(ops::Tuning::read(ops::Tuning::parse_text(options_.tune))) {
  set_log_level(options_.log_level);
  kernels_ = std::make_unique<jit::KernelCache>(cache_settings(options_));
}

std::string RuntimeImpl::arch_for_device(int device) {
  if (!options_.arch.empty()) return options_.arch;
  std::lock_guard<std::mutex> g(mutex_);
  auto it = device_facts_.find(device);
  if (it != device_facts_.end()) return it->second.first;
  const auto& drv = jit::CudaDriver::get();
  drv.require("device arch");
  CUdevice dev{};
  drv.check(drv.cuDeviceGet(&dev, device), "cuDeviceGet");
  int sms = 0;
  drv.check(drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
  auto [pos, _] = device_facts_.emplace(device, std::make_pair(drv.device_arch(device), sms));
  return pos->second.first;
}

std::string RuntimeImpl::default_arch() {
  if (!options_.arch.empty()) return options_.arch;
  if (jit::CudaDriver::get().available() && jit::CudaDriver::get().device_count() > 0) return arch_for_device(0);
  return "sm_90a";
}

int RuntimeImpl::sm_count(int device) {
  arch_for_device(device);  // fills device_facts_
  std::lock_guard<std::mutex> g(mutex_);
  auto it = device_facts_.find(device);
  if (it != device_facts_.end()) return it->second.second;
  // options_.arch was set, so the facts were not read yet.
  const auto& drv = jit::CudaDriver::get();
  drv.require("SM count");
  CUdevice dev{};
  drv.check(drv.cuDeviceGet(&dev, device), "cuDeviceGet");
  int sms = 0;
  drv.check(drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
  device_facts_.emplace(device, std::make_pair(drv.device_arch(device), sms));
  return sms;
}

std::shared_ptr<OpInstance> RuntimeImpl::op(std::string_view name, const nlohmann::json& given) {
  // NOTE: C++ callers write `rt.op("name", {})`, which is a JSON null: it means "no parameters".
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json& config = given.is_null() ? kEmpty : given;
  // NOTE: before dump(), which recurses: a config nested 100,000 deep must be an error, not a crash.
  check_json_value(config, fmt::format("{}: param: config", name));
  std::string cache_key = fmt::format("{}\n{}", name, config.dump());
  {
    std::lock_guard<std::mutex> g(mutex_);
    auto it = ops_.find(cache_key);
    if (it != ops_.end()) return it->second;
  }
  std::shared_ptr<OpInstance> instance;
  try {
    instance = find_op(name).create(*this, config);
  } catch (const Error&) {
    rethrow_with_op(name);
  }
  std::lock_guard<std::mutex> g(mutex_);
  return ops_.emplace(std::move(cache_key), std::move(instance)).first->second;
}

}  // namespace detail

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_shared<detail::RuntimeImpl>(std::move(options))) {}
Runtime::~Runtime() = default;
const RuntimeOptions& Runtime::options() const { return impl_->options(); }

Op Runtime::op(std::string_view name, const Config& config) {
  return Op(impl_->op(name, nlohmann::json::parse(config.json())));
}

std::vector<std::string> Runtime::op_names() {
  std::vector<std::string> names;
  for (const auto& d : detail::op_definitions()) names.push_back(d.name);
  return names;
}

Plan Op::plan(const TensorArgs& tensors) const {
  if (!impl_) throw InvalidArgument("op: expected an op from Runtime::op(), got an empty Op");
  return impl_->plan(tensors);
}

const std::string& Op::name() const {
  static const std::string empty;
  return impl_ ? impl_->name() : empty;
}

void Plan::execute(const TensorArgs& tensors, void* stream) const {
  if (!impl_) throw InvalidArgument("plan: expected a plan from Op::plan(), got an empty Plan");
  for (int i = 0; i < tensors.size(); ++i) {
    if (detail::tensor_problem(tensors.tensor(i))) {
      const std::string d = impl_->describe();
      detail::check_tensor_args(tensors, std::string_view(d).substr(0, d.find(' ')));
    }
  }
  try {
    if (workspace_ || caller_workspace_) {
      detail::CallerWorkspaceScope scope(reinterpret_cast<CUdeviceptr>(workspace_), workspace_size_);
      impl_->execute(tensors, stream);
      return;
    }
    impl_->execute(tensors, stream);
  } catch (const std::bad_alloc&) {
    const std::string d = impl_->describe();
    detail::throw_allocation_failure(tensors, std::string_view(d).substr(0, d.find(' ')));
  }
}

std::string Plan::describe() const { return impl_ ? impl_->describe() : std::string("(empty plan)"); }
std::size_t Plan::workspace_bytes() const {
  if (caller_workspace_) return planned_bytes_;
  return impl_ ? impl_->workspace_bytes() : 0;
}

const char* version() { return ATTNJIT_VERSION; }

}  // namespace attnjit
