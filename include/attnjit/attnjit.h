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

/* ---- Version, introspection, warm-up, caller workspace, logging (src/runtime/c_api_info.cpp). ---- */

/* The library version ("0.1.0"); static storage, never freed. */
ATTNJIT_API const char* attnjit_version(void);

/* JSON text returned through a char** is allocated by the library: release it with
 * attnjit_free_string(). On failure *out_json is NULL. */
ATTNJIT_API void attnjit_free_string(char* s);

/* A JSON array of the op names this build serves, e.g. ["paged_kv_write", "gqa_fwd", ...]. */
ATTNJIT_API attnjit_status attnjit_list_ops(char** out_json);

/* One op's argument table as a JSON object:
 *   {"name": "gqa_fwd", "spec": "2.7", "lse": "lse" | null,
 *    "tensors": [{"name", "role": "in"|"out"|"inout", "rank": n | [n, ...], "shape", "dtypes": [...],
 *                 "optional": bool}, ...],
 *    "params":  [{"name", "type": "bool"|"int"|"float"|"string"|"dtype", "default": value | null,
 *                 "required": bool, "choices"?: [...]}, ...]}
 * A null default means "unset" (the meaning SPEC.md gives, e.g. sm_scale = 1/sqrt(D)); "required"
 * parameters have no default. "impl" and "backend" are listed for every op. Unknown op:
 * ATTNJIT_INVALID_ARGUMENT naming the known ops. */
ATTNJIT_API attnjit_status attnjit_op_info(const char* op, char** out_json);

typedef struct {
  int kernels;    /* kernels in the selected ops' warm-up matrices */
  int compiled;   /* compiled by NVRTC by this runtime (now, or by an earlier call on it) */
  int cache_hits; /* loaded from the disk cache */
  int failed;     /* failed to compile (or missed in no-JIT mode) */
} attnjit_warmup_result;

/* Compiles every kernel the listed ops can select into the runtime's cache, as `attnjit warmup`.
 * ops: NULL or "" for every op, else comma-separated names ("paged_kv_write,gqa_fwd"). arch: NULL for
 * the runtime's default (the GPU's, else sm_90a). jobs <= 0: one per core. Returns ATTNJIT_OK when
 * nothing failed; otherwise the status of the first failure, with its message, and *out still
 * filled. out may be NULL. */
ATTNJIT_API attnjit_status attnjit_warmup(attnjit_runtime* rt, const char* ops, const char* arch, int jobs,
                                          attnjit_warmup_result* out);

/* Device scratch a plan needs for the shapes it was planned with (0 for reference plans). */
ATTNJIT_API attnjit_status attnjit_plan_workspace_size(const attnjit_plan* plan, size_t* bytes);

/* As attnjit_plan_create, but the plan never allocates device scratch (no cuMemAlloc): it runs on
 * `workspace` (device memory of at least attnjit_plan_workspace_size bytes, 256-byte aligned, e.g.
 * from the host framework's caching allocator), or on one bound later with attnjit_plan_set_workspace
 * when workspace is NULL. A buffer that is too small is refused (ATTNJIT_INVALID_ARGUMENT). */
ATTNJIT_API attnjit_status attnjit_plan_create_with_workspace(attnjit_runtime* rt, const char* op,
                                                              const char* config_json, int num_tensors,
                                                              const char* const* names, const DLTensor* tensors,
                                                              void* workspace, size_t workspace_bytes,
                                                              attnjit_plan** out);

/* Binds caller-owned device scratch to this plan handle (NULL unbinds): attnjit_plan_execute then uses
 * it. Refused when smaller than attnjit_plan_workspace_size or not 256-byte aligned. The memory must
 * outlive the executes that use it; ordering its reuse across streams is the caller's job. */
ATTNJIT_API attnjit_status attnjit_plan_set_workspace(attnjit_plan* plan, void* workspace, size_t bytes);

typedef enum {
  ATTNJIT_LOG_TRACE = 0,
  ATTNJIT_LOG_DEBUG = 1,
  ATTNJIT_LOG_INFO = 2,
  ATTNJIT_LOG_WARN = 3,
  ATTNJIT_LOG_ERROR = 4,
  ATTNJIT_LOG_CRITICAL = 5,
  ATTNJIT_LOG_OFF = 6
} attnjit_log_level;

/* Receives each log record (level, message without a trailing newline, user_data). Called on the
 * thread that logs, possibly several at once; it must not call back into attnjit. */
typedef void (*attnjit_log_callback)(int level, const char* message, void* user_data);

/* Sends the library's log records to `callback` instead of stderr; NULL restores the stderr sink.
 * Set it before other threads use the library. */
ATTNJIT_API attnjit_status attnjit_set_log_callback(attnjit_log_callback callback, void* user_data);

/* "trace", "debug", "info", "warn", "error", "critical" or "off" (the ATTNJIT_LOG_LEVEL names). */
ATTNJIT_API attnjit_status attnjit_set_log_level(const char* level);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_ATTNJIT_H_ */
