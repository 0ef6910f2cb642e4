// SpecBuilder (src/jit/spec_builder.hpp): the entry, the key fields and the readable name of a KernelSpec
// from one list of fields, with contributions moved before / after another field where a kernel needs it.
#include <doctest/doctest.h>

#include <stdexcept>

#include "jit/spec_builder.hpp"

using attnjit::jit::KernelSpec;
using attnjit::jit::SpecBuilder;

TEST_CASE("spec builder: fields in order, their template arguments and name segments follow them") {
  SpecBuilder b("paged_kv_write", "kv_cache/paged_kv_write.cuh", "attnjit::kernels::paged_kv_write", "sm_90a");
  b.field("backend", "portable").name("{}");
  b.field("dtype", "bf16").arg("__nv_bfloat16").name("{}");
  b.field("head_dim", 128).arg().name("d{}");
  b.field("causal", true).arg().name_if(true, "causal");
  b.field("window", false).arg().name_if(false, "window");
  const KernelSpec s = b.build();
  CHECK(s.op == "paged_kv_write");
  CHECK(s.template_file == "kv_cache/paged_kv_write.cuh");
  CHECK(s.arch == "sm_90a");
  CHECK(s.entry == "attnjit::kernels::paged_kv_write<__nv_bfloat16, 128, true, false>");
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"backend", "portable"}, {"dtype", "bf16"}, {"head_dim", "128"}, {"causal", "1"}, {"window", "0"}};
  CHECK(s.fields == fields);
  CHECK(s.name == "paged_kv_write.portable.bf16.d128.causal");
  CHECK(s.describe() == "paged_kv_write.portable.bf16.d128.causal.sm_90a");
}

TEST_CASE("spec builder: before / after move a contribution next to another field, declared earlier or later") {
  SpecBuilder b("op", "t.cuh", "k", "sm_80");
  b.field("backend", "portable").name("{}");
  b.field("kernel", "prep").name("{}").before("backend");
  b.field("q_dtype", "fp16").arg("__half");
  b.field("out_dtype", "fp32").arg("float").before("q_dtype");
  b.field("mode", "append").arg(3).name("{}").after("sinks");
  b.field("sinks", true).arg().name("sinks");
  b.field("split", false).arg_if(false, 1);
  const KernelSpec s = b.build();
  CHECK(s.entry == "k<float, __half, 3, true>");
  CHECK(s.name == "op.prep.portable.sinks.append");
  // The fields keep their declared order: moving a contribution moves no key field.
  CHECK(s.fields.size() == 7);
  CHECK(s.fields[3] == std::pair<std::string, std::string>("out_dtype", "fp32"));
  CHECK(s.fields[4] == std::pair<std::string, std::string>("mode", "append"));
}

TEST_CASE("spec builder: glued segments, name parts before any field, a bare entry, a misplaced anchor") {
  SpecBuilder b("op", "t.cuh", "k", "sm_90a");
  b.name("combine");
  b.field("block_n", 64).name("bn{}");
  b.field("stages", 2).name_glued("s{}");
  const KernelSpec s = b.build();
  CHECK(s.entry == "k");
  CHECK(s.name == "op.combine.bn64s2");

  SpecBuilder bad("op", "t.cuh", "k", "sm_90a");
  bad.field("a", 1).arg().before("no_such_field");
  CHECK_THROWS_AS(bad.build(), std::logic_error);
  SpecBuilder early("op", "t.cuh", "k", "sm_90a");
  CHECK_THROWS_AS(early.arg(), std::logic_error);
}
