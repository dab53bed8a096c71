// The capability table (the Linux backend, "Enforcement report"): for each
// capability of the contract, whether this host enforces it. The report
// prints this table and the launcher decides placement from the same
// computation (Assess + Place): there is no second copy.
#pragma once

#include <string>
#include <vector>

#include "sandbox/host/host_facts.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

enum class CapabilityId {
  kNoNewPrivs,
  kSeccomp,
  kFilesystem,
  kFilesystemMetadata,
  kExecWritableDeny,
  kGpu,
  kNetNone,
  kNetEgressAllowlist,
  kNetNoLoopback,
  kNetNoLinkLocal,
  kNetNeverListen,
  kNetEgressAny,
  kIpcUnixSockets,
  kIpcBrokerOnly,
  kIpcScoping,
  kIpcJob,    // ipc "job": TCP and UDP on the job's own loopback (policy.h IpcMode)
  kDebugJob,  // debug: ptrace of the job's own processes (policy.h Policy::debug)
  kChildrenNoNamespaces,
  kProcessContainer,
  kLimitsMemory,
  kLimitsCpu,
  kHideExistence,
  // Not a kernel feature: the escape battery has passed on this host for
  // the policy's class (attestation.h). Required to grant, not to launch.
  kBatteryProven,
};

enum class Status { kEnforced, kCooperative, kUnavailable };

struct CapabilityStatus {
  CapabilityId id;
  Status status;
  std::string detail;  // why, and what would make it enforced
};

// The capability ids are the same strings in code, JSON, JUnit and HTML.
const char* CapabilityName(CapabilityId id);
const char* StatusName(Status status);
std::vector<CapabilityId> AllCapabilities();

CapabilityStatus Assess(CapabilityId id, const HostFacts& host);
std::vector<CapabilityStatus> AssessAll(const HostFacts& host);

// What a policy needs enforced to run: its grants plus the always-on rules.
std::vector<CapabilityId> RequiredCapabilities(const Policy& policy);
// The always-on rules alone (the module contract), whatever the grants.
std::vector<CapabilityId> AlwaysOnCapabilities();

enum class Verdict { kOk, kBackendMissing, kCapabilityNotEnforced };
const char* VerdictName(Verdict verdict);  // "ok", "SANDBOX_BACKEND_MISSING", ...

struct Placement {
  Verdict verdict = Verdict::kOk;
  std::vector<CapabilityStatus> at_fault;  // required but not enforced
};

// What the launcher decides: can every required capability be enforced here?
Placement Place(const Policy& policy, const HostFacts& host);
// The same decision for a list of capabilities (the manifest's portability
// lint asks it before any Policy exists).
Placement PlaceCapabilities(const std::vector<CapabilityId>& need, const HostFacts& host);

// What an agent decides before granting a capability that runs module code
// (cage-before-capability): Place(), and the battery has passed on this
// host for the policy's class (attestation.h).
struct Attestation;
Placement PlaceForGrant(const Policy& policy, const HostFacts& host, const Attestation& attestation);

// One line for stderr: "sandbox: CAPABILITY_NOT_ENFORCED: filesystem (needs ...)".
std::string PlacementLine(const Placement& placement);

}  // namespace oarbank
