// The one planner for a job the supervisor runs (`run`, `cage`,
// cage::Run): from the policy, the host as probed and the caller's options
// it decides, without a syscall, everything the job will be: the launcher's
// plan with the job's own devices, its namespaces and id maps, its network,
// its cgroup leaf and limits, what the gate reads back before the exec, or
// the one line the job is refused with. The supervisor carries the plan out
// and `sandbox-report` prints it (JobPlanReport); neither decides again.
//
// The host is taken as probed: what a supervised job meets (an egress-any
// job's network, root's /etc view) is probed by ProbeSupervisedHost, never
// patched into another probe's facts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "oarbank/cage.h"  // RunOptions
#include "sandbox/host/host_facts.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/supervise/verify.h"

namespace oarbank {

struct JobPlan {
  Plan confinement;          // the launcher's plan, with the job's own devices
  NamespacePlan namespaces;  // and what its network namespace holds
  IdMaps id_maps;            // the job's user namespace
  CgroupDelegation cgroup;   // where its leaf goes, or why it has none
  LeafLimits limits;         // the policy's limits as the leaf's values
  // What the gate reads back from outside before the exec; the cgroup line
  // is added once the leaf is named (the supervisor names it).
  GateExpectations gate;
  std::string refusal;  // "" when the job may start, else the line it is refused with
};

// Pure: the whole plan of a job of `policy` on `host` (as
// ProbeSupervisedHost probed it) with `options`. A refusal is decided in this
// order: the Landlock floor, user namespaces, run_as, the placement, the
// /dev/shm size, then the limits the policy names that the host cannot
// enforce. The proof (battery.proven) is the supervisor's, since it reads
// the attestation.
JobPlan PlanSupervisedJob(const Policy& policy, const HostFacts& host, const cage::RunOptions& options);

// How deep ProbeSupervisedHost looks at an egress-any job's network.
enum class JobNetworkProbeDepth {
  kNone,   // no egress-any job: the facts say supervised, nothing more
  kParts,  // the stack and the helper are in place and trusted (a job's start is the trial)
  kTrial,  // and a real attempt on a throw-away namespace pair (the report)
};

// What a supervised job's plan reads of the host: every fact but the GPU
// nodes, which only devices.gpu = "compute" grants (they cost a listing of
// /dev, a string per entry, on every job). A fact left unread stays at its
// default, so a plan that came to need it would grant less, never more.
ProbeScope SupervisedProbeScope(const Policy& policy);

// The facts a supervised job meets: ProbeHost's (with `abi_cap`, within
// `scope`), its network at `depth` (job_network.h), and for root the
// idmapped /etc view (root_etc.h), with its proof copy when this process
// had not taken it yet: the job mounts that copy (a detached copy mounts
// once), and each later job's keeper makes its own.
HostFacts ProbeSupervisedHost(int abi_cap, JobNetworkProbeDepth depth, ProbeScope scope = {});

// The plan as the report prints it ($.supervisor.job, docs/json/report.md).
nlohmann::ordered_json JobPlanReport(const JobPlan& plan);

}  // namespace oarbank
