// Test-only, compiled into oarbank-agent-faulty alone: the enforcement
// points of a policy's plan, each removable by itself, for the mutation
// analysis (oarbank-conform mutants, harness/mutants.h). The list is made
// from the plan and the tables (each seccomp row, each Landlock right the
// ruleset handles, each class of path rule, each scope, each mount
// property, each launch step, each namespace, gate check and egress-any
// ruleset part of a supervised job), so a new rule is a new point with no
// code here.
//
// A point is removed by one environment variable of the faulty agent:
// OARBANK_FAULT_MUTANT=<id> for a point of the plan (RemovePlanPoint), or
// OARBANK_FAULT_SKIP_STEP=<name> for a step the code leaves out
// (common/fault_hooks.h).
#pragma once

#include <string>
#include <vector>

#include "sandbox/plan/plan.h"

namespace oarbank {

struct MutationPoint {
  std::string id;     // "seccomp.12.ptrace", "landlock.fs.write_file", "launch.no-new-privs", ...
  std::string layer;  // seccomp, landlock, mount, launch, job, gate, environment, egress
  std::string what;   // the rule in words
  std::string var;    // the variable that removes it
  std::string value;
  bool supervised_only = false;  // only a job of `run` has it
};

// Every point of `plan` (a policy's plan on this host). `net`: the
// policy's network mode (egress-any: the job's ruleset; egress-allowlist:
// the job's proxy's checks).
std::vector<MutationPoint> MutationPoints(const Plan& plan, NetMode net);

// Removes the plan point `id` (a MutationPoint's value for
// OARBANK_FAULT_MUTANT) from `plan`; false for an id it does not know.
bool RemovePlanPoint(const std::string& id, Plan& plan);

// `oarbank-agent-faulty mutation-points POLICY`: the points as one JSON
// array on stdout; 64 for a policy that does not parse.
int MutationPointsMain(int argc, char** argv);

}  // namespace oarbank
