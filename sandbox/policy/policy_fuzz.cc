// libFuzzer target for ParsePolicy (a bad policy is one line, "never a crash"). Any input is
// either a Policy or an Error that names its culprit; a crash, a sanitizer
// report, a hang or an Error with an empty `where` is a finding.
//
// Built as `policy_fuzz` with -DOARBANK_FUZZ=ON (clang); run it through
// scripts/fuzz-policy.sh, which seeds the corpus from fixtures/policies.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sandbox/policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parsed = oarbank::ParsePolicy(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) {
    if (parsed.error().where.empty() || parsed.error().what.empty()) abort();
    return 0;
  }
  // A policy always grants its bundle, first.
  const auto& grants = parsed.value().grants();
  if (grants.empty() || grants.front().path != parsed.value().bundle()) abort();
  return 0;
}
