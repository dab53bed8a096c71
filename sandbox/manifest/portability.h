// The portability lint (the module contract, "Testing your module"): for
// every platform a manifest declares, what that platform's backend can
// enforce of each requested grant, as enforced / cooperative / unavailable,
// and the placement code a node of that platform would advertise
// (ok, SANDBOX_BACKEND_MISSING, CAPABILITY_NOT_ENFORCED).
//
// Linux is this host, assessed by the capability table the launcher itself
// decides from (capabilities.h: Assess and PlaceCapabilities), so the lint
// can never claim more than the launcher would enforce here. macOS
// (Seatbelt) and Windows (AppContainer + Job Object) are not this host:
// their rows restate the contract's promises and its stated exceptions
// (Windows cannot enforce exec_writable = false without application
// control), and each row says that it is the contract's word, not a probe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/host/host_facts.h"
#include "sandbox/manifest/manifest.h"
#include "sandbox/plan/capabilities.h"

namespace oarbank {

struct GrantLint {
  std::string grant;                  // "net.mode = \"egress-any\"", "always-on rules"
  Status status = Status::kEnforced;  // the weakest of its capabilities
  std::vector<CapabilityStatus> capabilities;
};

struct PlatformLint {
  Platform platform;
  std::string backend;  // "Landlock + seccomp (this host: ...)", "Seatbelt", ...
  Verdict verdict = Verdict::kOk;
  std::vector<GrantLint> grants;
};

// One entry per declared platform, in the manifest's order. `linux_host`
// is this host's facts (ProbeHost()); tests inject any.
std::vector<PlatformLint> LintPortability(const Manifest& manifest, const HostFacts& linux_host);

nlohmann::ordered_json PortabilityJson(const std::vector<PlatformLint>& lint);
// Readable lines: "linux: CAPABILITY_NOT_ENFORCED", then one per grant.
std::string PortabilityText(const std::vector<PlatformLint>& lint);

}  // namespace oarbank
