// BackendPick (src/ops/base/backend.hpp): when the arch is read and the backend picked. 'auto' reads the
// arch and picks once per call, for the signature; an explicit backend does both only when a plan is built,
// so a 'hopper' that cannot serve the call throws there and not before.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "attnjit/error.hpp"
#include "ops/base/backend.hpp"

namespace {

using attnjit::detail::Backend;
using attnjit::ops::BackendPick;

// An OpContext that only answers arch_for_device, counting the calls.
struct ArchOnlyContext final : attnjit::ops::OpContext {
  std::string arch = "sm_90a";
  int arch_reads = 0;
  attnjit::jit::KernelCache& kernels() override { throw std::logic_error("kernels() is not used here"); }
  std::string arch_for_device(int) override {
    ++arch_reads;
    return arch;
  }
  int sm_count(int) override { return 132; }
  const attnjit::ops::Tuning& tuning() const override { return tuning_; }
  attnjit::ops::Tuning tuning_;
};

// The op's pick: pick_hopper with a static gap for archs other than sm_90a and a per-call condition.
auto op_pick(Backend backend, bool tma_ok, int& picks) {
  return [backend, tma_ok, &picks](const std::string& arch) {
    ++picks;
    return attnjit::ops::pick_hopper(
        "op", backend, [&] { return attnjit::ops::hopper_arch_gap(arch); }, [&] { return tma_ok; });
  };
}

}  // namespace

TEST_CASE("backend pick: 'auto' reads the arch and picks per call, for the signature") {
  ArchOnlyContext ctx;
  int picks = 0;
  BackendPick pick(ctx, Backend::kAuto, 0, op_pick(Backend::kAuto, true, picks));
  CHECK(ctx.arch_reads == 1);
  CHECK(picks == 1);
  CHECK(pick.auto_hopper());
  CHECK(pick.hopper());
  CHECK(pick.arch() == "sm_90a");
  CHECK(ctx.arch_reads == 1);
  CHECK(picks == 1);

  int quiet = 0;
  BackendPick untaken(ctx, Backend::kAuto, 0, op_pick(Backend::kAuto, false, quiet));
  CHECK_FALSE(untaken.auto_hopper());
  CHECK_FALSE(untaken.hopper());
}

TEST_CASE("backend pick: an explicit backend reads the arch and picks only when the plan is built") {
  ArchOnlyContext ctx;
  ctx.arch = "sm_80";
  int picks = 0;
  BackendPick hopper(ctx, Backend::kHopper, 0, op_pick(Backend::kHopper, true, picks));
  CHECK(ctx.arch_reads == 0);
  CHECK(picks == 0);
  CHECK_FALSE(hopper.auto_hopper());
  // The build: 'hopper' on sm_80 fails there, naming the gap.
  CHECK_THROWS_WITH_AS(hopper.hopper(), doctest::Contains("backend 'hopper': it needs sm_90a"), attnjit::Unsupported);
  CHECK(ctx.arch_reads == 1);

  BackendPick portable(ctx, Backend::kPortable, 0, op_pick(Backend::kPortable, true, picks));
  CHECK_FALSE(portable.auto_hopper());
  CHECK(portable.arch() == "sm_80");
  CHECK_FALSE(portable.hopper());
  CHECK(ctx.arch_reads == 2);
}
