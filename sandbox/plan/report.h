// The enforcement report: host facts, every capability with its status, and
// for a policy the placement verdict and the plan the launcher would apply.
// Built from the same Assess/Place/PlanConfinement the launcher runs.
#pragma once

#include <nlohmann/json.hpp>

#include "sandbox/host/host_facts.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

nlohmann::ordered_json HostReport(const HostFacts& host);
nlohmann::ordered_json PlanReport(const Plan& plan);

// Cage-before-capability for this policy on this host: PlaceForGrant with
// the battery attestation (attestation.h) checked against this kernel, the
// running launcher and this build's battery. The supervisor's gate decides
// from the same attestation (supervisor.h).
nlohmann::ordered_json GrantReport(const Policy& policy, const HostFacts& host);

}  // namespace oarbank
