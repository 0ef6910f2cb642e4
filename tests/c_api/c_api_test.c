/* The C ABI (include/attnjit/attnjit.h) from plain C11: paged_kv_write through the reference on host
 * DLTensors, by attnjit_run and by plan_create + plan_execute, and the error statuses and messages;
 * the version, op listing and argument tables, a warm-up of paged_kv_write into a temporary cache
 * (with the log callback receiving its records, then again in no-JIT mode) and workspace sizes.
 * Prints one line per check; exits non-zero when any check fails. */
#define _POSIX_C_SOURCE 200809L
#include <attnjit/attnjit.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_failures = 0;
static int g_checks = 0;

static void check(int ok, const char* what) {
  ++g_checks;
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) {
    ++g_failures;
    printf("      last error: \"%s\"\n", attnjit_last_error());
  }
  fflush(stdout);
}

/* Sizes of the call: N tokens, H heads, D dims, NP pages of PS slots. */
enum { N = 3, H = 2, D = 16, NP = 2, PS = 4 };
enum { ROW = H * D, POOL = NP * PS * H * D };

typedef struct {
  uint16_t k[N * ROW], v[N * ROW];
  uint16_t k_pages[POOL], v_pages[POOL];
  int64_t slots[N];
  int32_t slots32[N];
  int64_t shape_kv[3], shape_pages[4], shape_slots[1];
  DLTensor tensors[5];
} Call;

static const char* const kNames[5] = {"k", "v", "k_pages", "v_pages", "slot_mapping"};

static DLTensor host_tensor(void* data, DLDataTypeCode code, int bits, int ndim, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = (uint8_t)code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL; /* compact row-major */
  t.byte_offset = 0;
  return t;
}

/* Inputs with known bit patterns (seeded by `seed`), pools poisoned with 0xAB bytes. */
static void init_call(Call* c, uint16_t seed, int64_t s0, int64_t s1, int64_t s2) {
  int i;
  for (i = 0; i < N * ROW; ++i) {
    c->k[i] = (uint16_t)(seed + i);
    c->v[i] = (uint16_t)(seed + 0x1000 + 7 * i);
  }
  memset(c->k_pages, 0xAB, sizeof c->k_pages);
  memset(c->v_pages, 0xAB, sizeof c->v_pages);
  c->slots[0] = s0;
  c->slots[1] = s1;
  c->slots[2] = s2;
  for (i = 0; i < N; ++i) c->slots32[i] = (int32_t)c->slots[i];
  c->shape_kv[0] = N;
  c->shape_kv[1] = H;
  c->shape_kv[2] = D;
  c->shape_pages[0] = NP;
  c->shape_pages[1] = PS;
  c->shape_pages[2] = H;
  c->shape_pages[3] = D;
  c->shape_slots[0] = N;
  c->tensors[0] = host_tensor(c->k, kDLFloat, 16, 3, c->shape_kv);
  c->tensors[1] = host_tensor(c->v, kDLFloat, 16, 3, c->shape_kv);
  c->tensors[2] = host_tensor(c->k_pages, kDLFloat, 16, 4, c->shape_pages);
  c->tensors[3] = host_tensor(c->v_pages, kDLFloat, 16, 4, c->shape_pages);
  c->tensors[4] = host_tensor(c->slots, kDLInt, 64, 1, c->shape_slots);
}

/* Every pool row is either the row of the token whose slot names it, or still all 0xABAB. */
static int pools_match(const Call* c) {
  int slot, n, i;
  for (slot = 0; slot < NP * PS; ++slot) {
    int token = -1;
    for (n = 0; n < N; ++n)
      if (c->slots[n] == slot) token = n;
    for (i = 0; i < ROW; ++i) {
      const uint16_t want_k = token >= 0 ? c->k[token * ROW + i] : (uint16_t)0xABAB;
      const uint16_t want_v = token >= 0 ? c->v[token * ROW + i] : (uint16_t)0xABAB;
      if (c->k_pages[slot * ROW + i] != want_k || c->v_pages[slot * ROW + i] != want_v) return 0;
    }
  }
  return 1;
}

static int all_poison(const Call* c) {
  int i;
  for (i = 0; i < POOL; ++i)
    if (c->k_pages[i] != 0xABAB || c->v_pages[i] != 0xABAB) return 0;
  return 1;
}

static void remove_tree(const char* path) {
  DIR* d = opendir(path);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      char child[4096];
      struct stat st;
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(child, sizeof child, "%s/%s", path, e->d_name);
      if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(child);
      else unlink(child);
    }
    closedir(d);
  }
  rmdir(path);
}

/* ---- Version, introspection, warm-up, workspace size and the log callback. ---- */

typedef struct {
  int records;
  int compiled_records; /* "compiled <kernel> in ..." at info level */
  int max_level;
} LogSeen;

static void on_log(int level, const char* message, void* user) {
  LogSeen* seen = (LogSeen*)user;
  ++seen->records;
  if (level > seen->max_level) seen->max_level = level;
  if (strncmp(message, "compiled ", 9) == 0) ++seen->compiled_records;
}

static void check_info_entry_points(const char* cache_dir) {
  char* json = NULL;
  char options[4200];
  attnjit_runtime* rt = NULL;
  attnjit_plan* plan = NULL;
  attnjit_status st;
  attnjit_warmup_result w;
  LogSeen seen = {0, 0, -1};
  size_t bytes = 12345;
  static Call a;

  check(attnjit_version() != NULL && strcmp(attnjit_version(), "") != 0 && strchr(attnjit_version(), '.') != NULL,
        "attnjit_version returns a dotted version");

  st = attnjit_list_ops(&json);
  check(st == ATTNJIT_OK && json && json[0] == '[' && strstr(json, "\"paged_kv_write\"") && strstr(json, "\"gqa_fwd\"") &&
            strstr(json, "\"bsa_bwd\""),
        "attnjit_list_ops returns a JSON array naming paged_kv_write, gqa_fwd and bsa_bwd");
  attnjit_free_string(json);
  json = NULL;

  st = attnjit_op_info("gqa_fwd", &json);
  check(st == ATTNJIT_OK && json != NULL, "attnjit_op_info(gqa_fwd) succeeds");
  if (json) {
    check(strstr(json, "\"name\":\"q\"") && strstr(json, "\"role\":\"in\"") && strstr(json, "\"name\":\"o\"") &&
              strstr(json, "\"role\":\"out\""),
          "gqa_fwd's table lists q as an input and o as an output");
    check(strstr(json, "{\"default\":true,\"name\":\"is_causal\",\"required\":false,\"type\":\"bool\"}") != NULL,
          "gqa_fwd's is_causal is a bool defaulting to true");
    check(strstr(json, "\"name\":\"sm_scale\"") && strstr(json, "\"lse\":\"lse\"") && strstr(json, "\"rank\":4"),
          "gqa_fwd's table has sm_scale, its LSE output and ranks");
    attnjit_free_string(json);
    json = NULL;
  }
  st = attnjit_op_info("nope", &json);
  check(st == ATTNJIT_INVALID_ARGUMENT && json == NULL && strstr(attnjit_last_error(), "unknown op") &&
            strstr(attnjit_last_error(), "paged_kv_write"),
        "attnjit_op_info of an unknown op fails listing the known ops");
  st = attnjit_op_info("paged_kv_write", NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "attnjit_op_info with a NULL out pointer fails");
  st = attnjit_set_log_level("loud");
  check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "loud"), "an unknown log level is refused");

  /* Log records go to the callback: a warm-up at info level logs one "compiled ..." per kernel. */
  st = attnjit_set_log_callback(on_log, &seen);
  check(st == ATTNJIT_OK, "attnjit_set_log_callback installs a callback");
  snprintf(options, sizeof options, "{\"cache_dir\": \"%s\", \"log_level\": \"info\"}", cache_dir);
  st = attnjit_runtime_create(options, &rt);
  check(st == ATTNJIT_OK && rt, "a runtime with log_level info on a fresh cache");
  if (!rt) return;
  memset(&w, 0xff, sizeof w);
  st = attnjit_warmup(rt, "paged_kv_write", "sm_90a", 2, &w);
  check(st == ATTNJIT_OK && w.kernels > 0 && w.compiled == w.kernels && w.cache_hits == 0 && w.failed == 0,
        "attnjit_warmup(paged_kv_write, sm_90a) compiles every kernel of its matrix into the temp cache");
  printf("      warm-up: %d kernels, compiled %d, hits %d, failed %d\n", w.kernels, w.compiled, w.cache_hits, w.failed);
  check(seen.compiled_records == w.kernels && seen.max_level == ATTNJIT_LOG_INFO,
        "the log callback received one info record per compiled kernel");
  seen.compiled_records = 0;
  st = attnjit_warmup(rt, " paged_kv_write ", "sm_90a", 1, &w);
  check(st == ATTNJIT_OK && w.failed == 0 && w.compiled + w.cache_hits == w.kernels && seen.compiled_records == 0,
        "a second warm-up in the same runtime compiles nothing (names are trimmed)");
  st = attnjit_warmup(rt, "paged_kv_write,nope", "sm_90a", 1, &w);
  check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "nope"), "a warm-up of an unknown op fails");
  attnjit_runtime_destroy(rt);
  rt = NULL;
  st = attnjit_set_log_callback(NULL, NULL);
  check(st == ATTNJIT_OK, "attnjit_set_log_callback(NULL) restores stderr");

  /* No-JIT mode over the warmed cache: every kernel is found, nothing compiles. */
  snprintf(options, sizeof options, "{\"cache_dir\": \"%s\", \"no_jit\": true}", cache_dir);
  st = attnjit_runtime_create(options, &rt);
  check(st == ATTNJIT_OK && rt, "a no-JIT runtime on the warmed cache");
  if (!rt) return;
  st = attnjit_warmup(rt, "paged_kv_write", "sm_90a", 1, &w);
  check(st == ATTNJIT_OK && w.cache_hits == w.kernels && w.compiled == 0, "no-JIT warm-up: all hits");

  /* Workspace of a reference plan: 0 bytes, with or without a caller buffer. */
  init_call(&a, 0x3C00, 5, -1, 0);
  st = attnjit_plan_create_with_workspace(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors,
                                          NULL, 0, &plan);
  check(st == ATTNJIT_OK && plan, "attnjit_plan_create_with_workspace (no buffer) plans a reference call");
  if (plan) {
    st = attnjit_plan_workspace_size(plan, &bytes);
    check(st == ATTNJIT_OK && bytes == 0, "a reference plan needs 0 workspace bytes");
    st = attnjit_plan_set_workspace(plan, (void*)(uintptr_t)0x100, 0);
    check(st == ATTNJIT_OK, "binding a buffer of 0 bytes to a 0-byte plan is accepted");
    st = attnjit_plan_set_workspace(plan, (void*)(uintptr_t)0x101, 64);
    check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "aligned"),
          "an unaligned workspace is refused");
    st = attnjit_plan_set_workspace(plan, NULL, 0);
    st = attnjit_plan_execute(plan, 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_OK && pools_match(&a), "the plan executes");
    attnjit_plan_destroy(plan);
    plan = NULL;
  }
  st = attnjit_plan_create(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, &plan);
  if (plan) {
    bytes = 12345;
    st = attnjit_plan_workspace_size(plan, &bytes);
    check(st == ATTNJIT_OK && bytes == 0, "attnjit_plan_workspace_size of a plan_create reference plan is 0");
    attnjit_plan_destroy(plan);
  }
  st = attnjit_plan_workspace_size(NULL, &bytes);
  check(st == ATTNJIT_INVALID_ARGUMENT, "attnjit_plan_workspace_size(NULL) fails");
  attnjit_runtime_destroy(rt);
}

int main(void) {
  static Call a, b;
  char dir[] = "/tmp/attnjit-c-api-XXXXXX";
  char options[4200];
  const char* tmp = mkdtemp(dir);
  attnjit_runtime* rt = NULL;
  attnjit_plan* plan = NULL;
  attnjit_status st;

  check(tmp != NULL, "mkdtemp made a cache directory");
  if (!tmp) return 1;
  snprintf(options, sizeof options, "{\"cache_dir\": \"%s\"}", tmp);

  st = attnjit_runtime_create(options, &rt);
  check(st == ATTNJIT_OK && rt != NULL, "attnjit_runtime_create with options_json {cache_dir}");
  check(strcmp(attnjit_last_error(), "") == 0, "last error is empty after runtime_create");
  if (!rt) return 1;

  /* attnjit_run: token 0 -> slot 5, token 1 skipped, token 2 -> slot 0. */
  init_call(&a, 0x3C00, 5, -1, 0);
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_OK, "attnjit_run(paged_kv_write, impl reference) returns ATTNJIT_OK");
  check(strcmp(attnjit_last_error(), "") == 0, "last error is empty after attnjit_run");
  check(pools_match(&a), "attnjit_run wrote exactly the slotted rows, bitwise; other rows keep 0xAB");
  check(memcmp(&a.k_pages[5 * ROW], &a.k[0], ROW * 2) == 0 && memcmp(&a.v_pages[0], &a.v[2 * ROW], ROW * 2) == 0,
        "k row 0 is at slot 5 and v row 2 at slot 0");

  /* plan_create + plan_execute twice: the second time with other tensors of the same signature. */
  init_call(&a, 0x4000, 1, 7, -1);
  st = attnjit_plan_create(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, &plan);
  check(st == ATTNJIT_OK && plan != NULL, "attnjit_plan_create returns a plan");
  check(all_poison(&a), "plan_create writes nothing");
  if (plan) {
    st = attnjit_plan_execute(plan, 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_OK, "attnjit_plan_execute (first tensors) returns ATTNJIT_OK");
    check(strcmp(attnjit_last_error(), "") == 0, "last error is empty after plan_execute");
    check(pools_match(&a), "first execute wrote slots 1 and 7 only");
    init_call(&b, 0x2000, -1, 6, 2);
    st = attnjit_plan_execute(plan, 5, kNames, b.tensors, NULL);
    check(st == ATTNJIT_OK, "attnjit_plan_execute (second tensors) returns ATTNJIT_OK");
    check(pools_match(&b), "second execute wrote slots 6 and 2 of the second pools only");
    check(pools_match(&a), "second execute left the first pools alone");

    /* A rejected execute writes nothing and names the tensor and rule. */
    init_call(&b, 0x2000, 3, 4, 5);
    b.tensors[4] = host_tensor(b.slots32, kDLInt, 32, 1, b.shape_slots);
    st = attnjit_plan_execute(plan, 5, kNames, b.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT, "plan_execute with int32 slot_mapping returns ATTNJIT_INVALID_ARGUMENT");
    check(strstr(attnjit_last_error(), "slot_mapping") && strstr(attnjit_last_error(), "dtype"),
          "its last error names slot_mapping and dtype");
    check(all_poison(&b), "the rejected execute wrote nothing");
    attnjit_plan_destroy(plan);
  }

  /* A bad call: slot_mapping int32. */
  init_call(&a, 0x3C00, 5, -1, 0);
  a.tensors[4] = host_tensor(a.slots32, kDLInt, 32, 1, a.shape_slots);
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "int32 slot_mapping returns ATTNJIT_INVALID_ARGUMENT");
  check(strstr(attnjit_last_error(), "slot_mapping") != NULL, "last error names slot_mapping");
  check(strstr(attnjit_last_error(), "dtype") != NULL, "last error names the dtype rule");
  check(strncmp(attnjit_last_error(), "paged_kv_write: dtype: slot_mapping:", 36) == 0,
        "last error starts with \"paged_kv_write: dtype: slot_mapping:\"");
  check(all_poison(&a), "the rejected call wrote nothing");

  /* The message is cleared by the next success. */
  init_call(&a, 0x3C00, 5, -1, 0);
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_OK && strcmp(attnjit_last_error(), "") == 0, "a later success clears the last error");

  /* An unknown op (fresh, poisoned pools: every failure below must leave them so). */
  init_call(&a, 0x3C00, 5, -1, 0);
  st = attnjit_run(rt, "nope", "{}", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "unknown op returns ATTNJIT_INVALID_ARGUMENT");
  check(strstr(attnjit_last_error(), "unknown op") != NULL, "last error says \"unknown op\"");
  check(strstr(attnjit_last_error(), "paged_kv_write") != NULL, "last error lists paged_kv_write");

  /* Invalid JSON config. */
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": ", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "invalid config JSON returns ATTNJIT_INVALID_ARGUMENT");
  check(strstr(attnjit_last_error(), "config_json") != NULL, "last error names config_json");
  plan = (attnjit_plan*)&a; /* must be reset to NULL on failure */
  st = attnjit_plan_create(rt, "paged_kv_write", "not json", 5, kNames, a.tensors, &plan);
  check(st == ATTNJIT_INVALID_ARGUMENT && plan == NULL, "plan_create with invalid JSON fails and sets *out = NULL");

  /* An unknown config key and a bad impl. */
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\", \"bogus\": 1}", 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "param") &&
            strstr(attnjit_last_error(), "bogus"),
        "unknown config key returns ATTNJIT_INVALID_ARGUMENT naming it (param)");

  /* Argument errors at the ABI boundary. */
  st = attnjit_run(NULL, "paged_kv_write", NULL, 5, kNames, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "a NULL runtime returns ATTNJIT_INVALID_ARGUMENT");
  st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, NULL, a.tensors, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "NULL names returns ATTNJIT_INVALID_ARGUMENT");
  check(all_poison(&a), "none of the failed calls wrote anything");

  /* Descriptors checked before anything is dereferenced. */
  {
    const char* dup_names[5] = {"k", "v", "k_pages", "k_pages", "slot_mapping"};
    int32_t foreign = 999;
    init_call(&a, 0x3C00, 5, -1, 0);
    a.tensors[2].data = NULL;
    st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT &&
              strncmp(attnjit_last_error(), "paged_kv_write: layout: k_pages: expected a non-NULL data", 57) == 0,
          "a NULL data pointer with a non-empty shape is rejected naming the tensor");
    init_call(&a, 0x3C00, 5, -1, 0);
    a.tensors[0].shape = NULL;
    st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "k: expected a shape array"),
          "a NULL shape with ndim > 0 is rejected");
    init_call(&a, 0x3C00, 5, -1, 0);
    a.tensors[1].byte_offset = (uint64_t)1 << 63;
    st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "byte_offset"), "a byte_offset of 2^63 is rejected");
    init_call(&a, 0x3C00, 5, -1, 0);
    memcpy(&a.tensors[4].device.device_type, &foreign, sizeof foreign);
    st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, kNames, a.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "device type 999"),
          "a foreign DLDeviceType value is rejected");
    init_call(&a, 0x3C00, 5, -1, 0);
    st = attnjit_run(rt, "paged_kv_write", "{\"impl\": \"reference\"}", 5, dup_names, a.tensors, NULL);
    check(st == ATTNJIT_INVALID_ARGUMENT && strstr(attnjit_last_error(), "k_pages: expected each tensor name once"),
          "the same tensor name twice is rejected naming it");
    check(all_poison(&a), "none of the rejected descriptors wrote anything");
    attnjit_plan_destroy(NULL);
    attnjit_runtime_destroy(NULL);
    check(1, "destroying NULL handles is a no-op");
  }

  attnjit_runtime_destroy(rt);

  /* options_json: an unknown key, a wrong type, and invalid JSON all fail without a runtime. */
  rt = (attnjit_runtime*)&a;
  st = attnjit_runtime_create("{\"cache_dirr\": \"/tmp\"}", &rt);
  check(st == ATTNJIT_INVALID_ARGUMENT && rt == NULL, "options_json with an unknown key fails, *out = NULL");
  check(strstr(attnjit_last_error(), "cache_dirr") != NULL, "its last error names the key");
  st = attnjit_runtime_create("{\"cache_max_bytes\": \"big\"}", &rt);
  check(st == ATTNJIT_INVALID_ARGUMENT, "options_json with a wrong type fails");
  st = attnjit_runtime_create("{cache_dir", &rt);
  check(st == ATTNJIT_INVALID_ARGUMENT, "invalid options_json fails");
  st = attnjit_runtime_create(options, NULL);
  check(st == ATTNJIT_INVALID_ARGUMENT, "a NULL out pointer fails");

  {
    char dir2[] = "/tmp/attnjit-c-api-warm-XXXXXX";
    const char* warm = mkdtemp(dir2);
    check(warm != NULL, "mkdtemp made a warm-up cache directory");
    if (warm) {
      check_info_entry_points(warm);
      remove_tree(warm);
    }
  }

  remove_tree(tmp);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
