// Target arch strings ("sm_90a", "sm_80") and what each offers the planners: one facts struct, so the
// requirement "the hopper kernels need sm_90a" is written once.
#pragma once
#include <string>

namespace attnjit::ops {

// 90 for "sm_90a", 80 for "sm_80"; 0 when the string is not of that form.
inline int arch_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  int n = 0;
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) n = n * 10 + (arch[i] - '0');
  return n;
}

// The arch the hopper backend's kernels are compiled for: wgmma and the TMA/mbarrier forms they use are
// sm_90a features (the 'a' target), so neither sm_90 nor a later arch runs them.
inline constexpr const char* kHopperArch = "sm_90a";

struct ArchFacts {
  int number = 0;            // arch_number()
  bool portable = false;     // mma.sync on 16-bit operands, cp.async: the portable kernels (sm_80+)
  bool fp8_mma = false;      // mma.sync on e4m3 operands (sm_89+)
  bool wgmma_tma = false;    // wgmma, TMA tensor maps, mbarrier transaction counts: the hopper kernels
  bool programmatic_dependent_launch = false;  // sm_90+
  int max_smem_per_block = 0;  // opt-in dynamic shared memory per block, bytes (the device may allow less)
};

inline ArchFacts arch_facts(const std::string& arch) {
  ArchFacts f;
  f.number = arch_number(arch);
  f.portable = f.number >= 80;
  f.fp8_mma = f.number >= 89;
  f.wgmma_tma = arch == kHopperArch;
  f.programmatic_dependent_launch = f.number >= 90;
  f.max_smem_per_block = f.number >= 90 ? 227 * 1024 : f.number >= 86 ? 99 * 1024 : f.number >= 80 ? 163 * 1024 : 48 * 1024;
  return f;
}

// Whether the hopper backend's kernels run on `arch`.
inline bool has_hopper_kernels(const std::string& arch) { return arch_facts(arch).wgmma_tma; }

}  // namespace attnjit::ops
