// libFuzzer target for ParseManifest and the approval digest (manifest.h,
// approval.h): any input is either a Manifest or an Error naming its
// culprit in one line; a crash, a sanitizer report, a hang, an Error with an
// empty `where`, or a manifest whose canonical form does not parse back to
// the same digest is a finding.
//
// Built as `manifest_fuzz` with -DOARBANK_FUZZ=ON (clang); run it through
// scripts/fuzz-manifest.sh, which seeds the corpus from fixtures/manifests.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sandbox/manifest/approval.h"
#include "sandbox/manifest/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parsed = oarbank::ParseManifest(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) {
    if (parsed.error().where.empty() || parsed.error().what.empty()) abort();
    if (oarbank::ManifestErrorLine(parsed.error()).find('\n') != std::string::npos) abort();
    return 0;
  }
  const oarbank::Manifest& m = parsed.value();
  if (m.platforms.empty()) abort();
  const std::string canonical = oarbank::CanonicalRequests(m);
  const auto j = nlohmann::json::parse(canonical, nullptr, false);
  if (j.is_discarded() || j.dump() != canonical) abort();
  if (oarbank::RequestsDigest(m) != oarbank::RequestsDigest(m)) abort();
  // Requesting nothing and needing no approval are the same thing.
  if (m.RequestsNothing() != !oarbank::CheckApproved(m, {}).has_value()) abort();
  return 0;
}
