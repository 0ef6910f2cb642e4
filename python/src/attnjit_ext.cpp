// attnjit._attnjit: the compiled call path of the Python package, over the C ABI (attnjit.h) only.
// Tensors arrive as objects with __dlpack__ (torch, numpy, cupy, jax, ...) or as DLPack capsules
// and are passed to the library as borrowed DLTensors: no copy, no ctypes structures per call.
#include <attnjit/attnjit.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace {

// DLPack 1.x's versioned capsule ("dltensor_versioned"); Debian's dlpack 0.6 header predates it.
struct DLPackVersion10 {
  uint32_t major, minor;
};
struct DLManagedTensorVersioned10 {
  DLPackVersion10 version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned10*);
  uint64_t flags;
  DLTensor dl_tensor;
};

PyObject* g_errors[7] = {};  // by attnjit_status; set at module init

// A faster export for one tensor type (the package registers torch.Tensor with torch._C._to_dlpack):
// torch's __dlpack__ orders the producer's stream against the consumer's with an event on every call,
// which costs microseconds a tensor; the library launches on the stream the caller names, so the plain
// export is what it needs. Set once at import; null: every object goes through __dlpack__.
PyTypeObject* g_fast_type = nullptr;
PyObject* g_fast_export = nullptr;

[[noreturn]] void raise_status(attnjit_status st) {
  PyObject* type = (st > 0 && st < 7 && g_errors[st]) ? g_errors[st] : PyExc_RuntimeError;
  PyErr_SetString(type, attnjit_last_error());
  throw nb::python_error();
}

inline void check(attnjit_status st) {
  if (st != ATTNJIT_OK) raise_status(st);
}

// The DLTensors of one call and the capsules that keep them alive.
struct CallTensors {
  std::vector<const char*> names;
  std::vector<DLTensor> tensors;
  std::vector<nb::object> keep;

  CallTensors(nb::handle names_seq, nb::handle tensors_seq) {
    if (!PyTuple_Check(names_seq.ptr()) || !PyTuple_Check(tensors_seq.ptr()) ||
        PyTuple_GET_SIZE(tensors_seq.ptr()) != PyTuple_GET_SIZE(names_seq.ptr()))
      throw nb::type_error("names and tensors: expected two tuples of equal length");
    const Py_ssize_t n = PyTuple_GET_SIZE(names_seq.ptr());
    names.resize(n);
    tensors.resize(n);
    keep.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* name = PyTuple_GET_ITEM(names_seq.ptr(), i);
      const char* s = PyUnicode_AsUTF8(name);
      if (!s) throw nb::python_error();
      names[i] = s;
      tensors[i] = as_dltensor(nb::handle(PyTuple_GET_ITEM(tensors_seq.ptr(), i)), s);
    }
  }

  DLTensor as_dltensor(nb::handle obj, const char* name) {
    nb::object capsule;
    if (PyCapsule_CheckExact(obj.ptr())) {
      capsule = nb::borrow(obj);
    } else if (g_fast_type && PyObject_TypeCheck(obj.ptr(), g_fast_type)) {
      PyObject* c = PyObject_CallOneArg(g_fast_export, obj.ptr());
      if (!c) throw nb::python_error();
      capsule = nb::steal(c);
    } else {
      nb::object fn = nb::getattr(obj, "__dlpack__", nb::none());
      if (fn.is_none())
        throw nb::type_error((std::string(name) + ": expected a tensor (an object with __dlpack__, or a DLPack "
                                                  "capsule), got " + nb::type_name(obj.type()).c_str()).c_str());
      // NOTE: the unversioned export first (the cheapest call); numpy exports read-only arrays only
      // as DLPack 1.0, so a BufferError asks again with max_version.
      PyObject* c = PyObject_CallNoArgs(fn.ptr());
      if (!c) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError)) throw nb::python_error();
        PyErr_Clear();
        capsule = fn(nb::arg("max_version") = nb::make_tuple(1, 0));
      } else {
        capsule = nb::steal(c);
      }
    }
    keep.push_back(capsule);
    if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
      auto* m = static_cast<DLManagedTensorVersioned10*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
      return m->dl_tensor;
    }
    if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
      return m->dl_tensor;
    }
    throw nb::type_error((std::string(name) + ": expected an unconsumed DLPack capsule").c_str());
  }

  int size() const { return static_cast<int>(names.size()); }
};

class Plan {
 public:
  explicit Plan(attnjit_plan* p) : p_(p) {}
  ~Plan() { attnjit_plan_destroy(p_); }
  Plan(const Plan&) = delete;

  void run(nb::handle names, nb::handle tensors, std::uintptr_t stream) {
    CallTensors call(names, tensors);
    attnjit_status st;
    {
      nb::gil_scoped_release nogil;
      st = attnjit_plan_execute(p_, call.size(), call.names.data(), call.tensors.data(),
                                reinterpret_cast<void*>(stream));
    }
    check(st);
  }
  std::size_t workspace_size() const {
    size_t b = 0;
    check(attnjit_plan_workspace_size(p_, &b));
    return b;
  }
  void set_workspace(std::uintptr_t ptr, std::size_t bytes) {
    check(attnjit_plan_set_workspace(p_, reinterpret_cast<void*>(ptr), bytes));
  }
  attnjit_plan* get() { return p_; }

 private:
  attnjit_plan* p_;
};

class Runtime {
 public:
  explicit Runtime(const std::string& options_json) {
    check(attnjit_runtime_create(options_json.c_str(), &rt_));
  }
  ~Runtime() { attnjit_runtime_destroy(rt_); }
  Runtime(const Runtime&) = delete;

  void run(const char* op, const char* config, nb::handle names, nb::handle tensors, std::uintptr_t stream) {
    CallTensors call(names, tensors);
    attnjit_status st;
    {
      nb::gil_scoped_release nogil;
      st = attnjit_run(rt_, op, config, call.size(), call.names.data(), call.tensors.data(),
                       reinterpret_cast<void*>(stream));
    }
    check(st);
  }

  Plan* plan(const char* op, const char* config, nb::handle names, nb::handle tensors, bool caller_workspace,
             std::uintptr_t workspace, std::size_t workspace_bytes) {
    CallTensors call(names, tensors);
    attnjit_plan* p = nullptr;
    attnjit_status st;
    {
      nb::gil_scoped_release nogil;
      st = caller_workspace
               ? attnjit_plan_create_with_workspace(rt_, op, config, call.size(), call.names.data(),
                                                    call.tensors.data(), reinterpret_cast<void*>(workspace),
                                                    workspace_bytes, &p)
               : attnjit_plan_create(rt_, op, config, call.size(), call.names.data(), call.tensors.data(), &p);
    }
    check(st);
    return new Plan(p);
  }

  nb::dict warmup(const std::string& ops, const std::string& arch, int jobs) {
    attnjit_warmup_result r{};
    attnjit_status st;
    {
      nb::gil_scoped_release nogil;
      st = attnjit_warmup(rt_, ops.c_str(), arch.empty() ? nullptr : arch.c_str(), jobs, &r);
    }
    check(st);
    nb::dict d;
    d["kernels"] = r.kernels;
    d["compiled"] = r.compiled;
    d["cache_hits"] = r.cache_hits;
    d["failed"] = r.failed;
    return d;
  }

 private:
  attnjit_runtime* rt_ = nullptr;
};

std::string take_string(char* s) {
  std::string out(s ? s : "");
  attnjit_free_string(s);
  return out;
}

nb::object g_log_callback;

void forward_log(int level, const char* message, void*) {
  nb::gil_scoped_acquire gil;
  if (!g_log_callback.is_valid() || g_log_callback.is_none()) return;
  try {
    g_log_callback(level, message);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("attnjit log callback");
  }
}

}  // namespace

NB_MODULE(_attnjit, m) {
  m.doc() = "attnjit's compiled call path (over the C ABI); use the attnjit package, not this module.";
  const char* names[7] = {nullptr, nullptr, nullptr, "CompileError", "CudaError", "CacheError", "InternalError"};
  g_errors[ATTNJIT_INVALID_ARGUMENT] = PyExc_ValueError;
  g_errors[ATTNJIT_UNSUPPORTED] = PyExc_NotImplementedError;
  for (int s = ATTNJIT_COMPILE_ERROR; s <= ATTNJIT_INTERNAL; ++s) {
    g_errors[s] = PyErr_NewException((std::string("attnjit.") + names[s]).c_str(), PyExc_RuntimeError, nullptr);
    m.attr(names[s]) = nb::handle(g_errors[s]);
  }

  nb::class_<Plan>(m, "Plan")
      .def("run", &Plan::run, nb::arg("names"), nb::arg("tensors"), nb::arg("stream") = 0)
      .def_prop_ro("workspace_size", &Plan::workspace_size)
      .def("set_workspace", &Plan::set_workspace, nb::arg("ptr"), nb::arg("bytes"));

  nb::class_<Runtime>(m, "Runtime")
      .def(nb::init<const std::string&>(), nb::arg("options_json") = "")
      .def("run", &Runtime::run, nb::arg("op"), nb::arg("config_json"), nb::arg("names"), nb::arg("tensors"),
           nb::arg("stream") = 0)
      .def("plan", &Runtime::plan, nb::arg("op"), nb::arg("config_json"), nb::arg("names"), nb::arg("tensors"),
           nb::arg("caller_workspace") = false, nb::arg("workspace") = 0, nb::arg("workspace_bytes") = 0,
           nb::rv_policy::take_ownership)
      .def("warmup", &Runtime::warmup, nb::arg("ops") = "", nb::arg("arch") = "", nb::arg("jobs") = 0);

  m.def("version", [] { return std::string(attnjit_version()); });
  m.def("list_ops", [] {
    char* s = nullptr;
    check(attnjit_list_ops(&s));
    return take_string(s);
  });
  m.def("op_info", [](const std::string& op) {
    char* s = nullptr;
    check(attnjit_op_info(op.c_str(), &s));
    return take_string(s);
  });
  m.def("set_log_level", [](const std::string& level) { check(attnjit_set_log_level(level.c_str())); });
  m.def("set_log_callback", [](nb::object fn) {
    g_log_callback = fn;
    check(attnjit_set_log_callback(fn.is_none() ? nullptr : forward_log, nullptr));
  }, nb::arg("callback").none());
  // Sets the dtype of a fresh, unconsumed DLPack capsule in place (host arrays of bf16 / e4m3 are
  // numpy uint16 / uint8 arrays): attnjit.HostView uses it.
  m.def("retype", [](nb::object capsule, int code, int bits) {
    DLTensor* t = nullptr;
    if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned"))
      t = &static_cast<DLManagedTensorVersioned10*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"))->dl_tensor;
    else if (PyCapsule_IsValid(capsule.ptr(), "dltensor"))
      t = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"))->dl_tensor;
    else
      throw nb::type_error("retype: expected an unconsumed DLPack capsule");
    if (t->dtype.bits != bits) throw nb::value_error("retype: the storage's element size differs from the dtype's");
    t->dtype.code = static_cast<uint8_t>(code);
    return capsule;
  });
  // Registers the fast export of one tensor type (see g_fast_type); the references live as long as the module.
  m.def("_set_fast_export", [](nb::handle type, nb::handle fn) {
    if (!PyType_Check(type.ptr()) || !PyCallable_Check(fn.ptr()))
      throw nb::type_error("_set_fast_export: expected a type and a callable");
    Py_INCREF(type.ptr());
    Py_INCREF(fn.ptr());
    Py_XDECREF(reinterpret_cast<PyObject*>(g_fast_type));
    Py_XDECREF(g_fast_export);
    g_fast_type = reinterpret_cast<PyTypeObject*>(type.ptr());
    g_fast_export = fn.ptr();
  });
  // The Python exception type a status maps to (tests; a GPU-less machine cannot reach every status).
  m.def("_exception_for_status", [](int st) {
    return nb::borrow<nb::object>((st > 0 && st < 7 && g_errors[st]) ? g_errors[st] : PyExc_RuntimeError);
  });
  // Benchmark helper: the C ABI's execute of `plan` in a C++ loop, microseconds per call.
  m.def("bench_execute", [](Plan& plan, nb::handle names, nb::handle tensors, int iters) {
    CallTensors call(names, tensors);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      check(attnjit_plan_execute(plan.get(), call.size(), call.names.data(), call.tensors.data(), nullptr));
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  });
  // Drop the Python log callback before the interpreter goes away.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    attnjit_set_log_callback(nullptr, nullptr);
    g_log_callback = nb::object();
  }));
}
