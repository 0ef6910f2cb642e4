// attnjit: the exception hierarchy. Every error the library raises derives from attnjit::Error.
#pragma once
#include <attnjit/export.hpp>
#include <stdexcept>
#include <string>

namespace attnjit {

// Status codes shared with the C ABI (attnjit_status in attnjit.h).
enum class Status : int {
  kOk = 0,
  kInvalidArgument = 1,
  kUnsupported = 2,
  kCompileError = 3,
  kCudaError = 4,
  kCacheError = 5,
  kInternal = 6,
};

class ATTNJIT_API Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// A call or construction argument breaks a rule of the contract: the message names the op, the
// category (shape, dtype, device, layout, param, args, content), the argument, the rule and the value.
class ATTNJIT_API InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& m) : Error(Status::kInvalidArgument, m) {}
};

// A well-formed request this build (or the chosen backend) does not serve; lists the unmet requirement.
class ATTNJIT_API Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& m) : Error(Status::kUnsupported, m) {}
};

// NVRTC rejected a kernel: the message carries the kernel's describe() and the NVRTC log.
class ATTNJIT_API CompileError : public Error {
 public:
  CompileError(const std::string& m, std::string kernel, std::string log)
      : Error(Status::kCompileError, m), kernel_(std::move(kernel)), log_(std::move(log)) {}
  const std::string& kernel() const noexcept { return kernel_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string kernel_, log_;
};

// The CUDA driver reported an error (or is absent where one is needed): carries the driver's name.
class ATTNJIT_API CudaError : public Error {
 public:
  CudaError(const std::string& m, int code) : Error(Status::kCudaError, m), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

// The kernel cache cannot serve a request (e.g. a miss in no-JIT mode).
class ATTNJIT_API CacheError : public Error {
 public:
  explicit CacheError(const std::string& m) : Error(Status::kCacheError, m) {}
};

}  // namespace attnjit
