/* attnjit: the C ABI, for C callers and any FFI (Python ctypes, Rust, ...).
 * Every function returns a status; on failure attnjit_last_error() holds a thread-local message that
 * names the tensor, the rule and the value. Tensors are DLPack DLTensors, named by SPEC.md's argument
 * names (outputs included; the caller allocates them). config_json holds the op's construction-time
 * parameters by SPEC.md's names, plus "impl" ("kernel" | "reference") and "backend".
 *
 * Every entry point validates before it dereferences anything: NULL pointers, 0 <= ndim <= 8, a shape
 * array for ndim > 0, a non-NULL data pointer for a tensor with elements, byte_offset and strides whose
 * element counts and bytes spanned fit int64, a known DLDeviceType, each tensor name at most once,
 * JSON (config_json, options_json) at most 64 deep and 1 MiB long. A rejected call writes nothing.
 *
 * Handles: destroying NULL is a no-op. Destroying a handle twice, or using it after its destroy, is a
 * caller error; the library detects it while the address has not been handed out again (the second
 * destroy is ignored, execute returns ATTNJIT_INVALID_ARGUMENT), and is undefined otherwise. */
#ifndef ATTNJIT_ATTNJIT_H_
#define ATTNJIT_ATTNJIT_H_

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ATTNJIT_API __attribute__((visibility("default")))
#else
#define ATTNJIT_API
#endif

typedef struct attnjit_runtime attnjit_runtime;
typedef struct attnjit_plan attnjit_plan;

typedef enum {
  ATTNJIT_OK = 0,
  ATTNJIT_INVALID_ARGUMENT = 1,
  ATTNJIT_UNSUPPORTED = 2,
  ATTNJIT_COMPILE_ERROR = 3,
  ATTNJIT_CUDA_ERROR = 4,
  ATTNJIT_CACHE_ERROR = 5,
  ATTNJIT_INTERNAL = 6
} attnjit_status;

/* options_json: NULL or a JSON object with RuntimeOptions field names (see README); the ATTNJIT_*
 * environment variables are read first, the JSON overrides them. */
ATTNJIT_API attnjit_status attnjit_runtime_create(const char* options_json, attnjit_runtime** out);
ATTNJIT_API void attnjit_runtime_destroy(attnjit_runtime* rt);

ATTNJIT_API attnjit_status attnjit_plan_create(attnjit_runtime* rt, const char* op, const char* config_json,
                                               int num_tensors, const char* const* names,
                                               const DLTensor* tensors, attnjit_plan** out);
ATTNJIT_API attnjit_status attnjit_plan_execute(attnjit_plan* plan, int num_tensors, const char* const* names,
                                                const DLTensor* tensors, void* stream);
ATTNJIT_API void attnjit_plan_destroy(attnjit_plan* plan);

/* plan (cached by op, config and static signature) + execute */
ATTNJIT_API attnjit_status attnjit_run(attnjit_runtime* rt, const char* op, const char* config_json,
                                       int num_tensors, const char* const* names, const DLTensor* tensors,
                                       void* stream);

/* thread-local, names the tensor, rule and value; "" after a success */
ATTNJIT_API const char* attnjit_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_ATTNJIT_H_ */
