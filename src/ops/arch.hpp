// Target arch strings ("sm_90a", "sm_80"): their numeric part, for backend requirements.
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

}  // namespace attnjit::ops
