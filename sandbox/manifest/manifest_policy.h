// The agent's step from an approved manifest to the Policy JSON the
// launcher takes, for one job: a role and the job's directories.
//
// What a role gets (the module contract, "What every module process may
// touch"): only a runner has work, tools for runners, services and probes,
// never a coordinator; exec_writable and the broker (containers) for a
// runner only; net and the GPU for every role that requested them. The
// result is checked by ParsePolicy before it is returned, so the JSON this
// gives is always one the launcher accepts, and a problem with the job's
// directories is the Policy's own one-line error.
//
// ManifestToPolicy refuses an unapproved manifest (approval.h) before it
// looks at anything else. BuildPolicyJson is the pure part, used by
// `oarbank-conform module` (a module author's test run, which approves
// nothing and runs on no node).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/common/expected.h"
#include "sandbox/manifest/approval.h"
#include "sandbox/manifest/manifest.h"
#include "sandbox/manifest/tool_registry.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

struct JobDirs {
  Role role = Role::kRunner;
  std::string bundle;
  std::optional<std::string> runtime;
  std::optional<std::string> work;  // runner only
  std::optional<std::string> data;
  std::optional<std::string> tmp;     // inside work (runner) or data (others)
  std::optional<std::string> broker;  // the job's broker socket, when containers are requested
  int proxy_port = 0;                 // the agent's egress proxy, for egress-allowlist
  std::optional<double> mem_gb;
  std::optional<double> cpus;
};

// The Policy JSON for this manifest and job, unchecked. Errors name the
// job field that is missing for a request ("job.proxy_port").
Expected<nlohmann::ordered_json> BuildPolicyJson(const Manifest& manifest, const std::vector<ResolvedTool>& tools,
                                                 const JobDirs& job);

struct ManifestPolicy {
  std::string policy_json;          // accepted by ParsePolicy
  std::vector<ResolvedTool> tools;  // for OARBANK_TOOLS_FILE
};

// Approval first, then the tools through the registry, then the Policy,
// checked by ParsePolicy. Error `where`s: "approval", "sandbox.tools[0].id",
// "job.<field>", or "policy.<field>" for ParsePolicy's own refusal.
Expected<ManifestPolicy> ManifestToPolicy(const Manifest& manifest, const std::vector<ApprovalRecord>& approvals,
                                          const ToolRegistry& registry, const JobDirs& job);

}  // namespace oarbank
