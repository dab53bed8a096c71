#include "sandbox/supervise/job_plan.h"

#include <algorithm>
#include <utility>

#include "sandbox/plan/capabilities.h"
#include "sandbox/supervise/job_network.h"

namespace oarbank {
namespace {

// The host a job needs at all: the Landlock floor, user namespaces (no
// quiet fallback to a launch without them), a root supervisor for run_as.
std::string HostRefusal(const HostFacts& host, const cage::RunOptions& options) {
  const int floor = std::max(1, options.abi_floor);
  if (host.landlock_abi < floor)
    return "abi_floor: this host's Landlock ABI is " + std::to_string(host.landlock_abi) + ", below the floor " +
           std::to_string(floor);
  if (!host.user_namespaces) return "namespaces: user namespaces are refused here: " + host.user_namespaces_detail;
  if ((options.run_as_uid || options.run_as_gid) && !host.runs_as_root) return "run_as: needs a root supervisor";
  return "";
}

// The cage itself: the placement, then the job's own devices.
std::string PlanConfinementPart(JobPlan& plan, const Policy& policy, const HostFacts& host,
                                const cage::RunOptions& options) {
  plan.confinement = PlanConfinement(policy, host);
  if (plan.confinement.placement.verdict != Verdict::kOk) return PlacementLine(plan.confinement.placement);
  if (options.shm_max < 4096) return "shm_max: /dev/shm needs at least 4096 bytes";
  PlanJobDevices(plan.confinement, options.shm_max);
  return "";
}

// The cgroup leaf and its limits; a limit the policy names that the host
// cannot enforce is a refusal, never a quiet `unavailable`.
std::string PlanCgroupPart(JobPlan& plan, const Policy& policy, const HostFacts& host,
                           const cage::RunOptions& options) {
  plan.cgroup = DetectCgroupDelegation(host.cgroup);
  plan.limits = PlanLeafLimits(policy.limits(), options.hard_limits, plan.cgroup.usable && plan.cgroup.pids);
  for (const auto& [needed, id] : {std::pair{plan.limits.needs_memory(), CapabilityId::kLimitsMemory},
                                   {plan.limits.needs_cpu(), CapabilityId::kLimitsCpu}}) {
    if (!needed) continue;
    const CapabilityStatus status = Assess(id, host);
    if (status.status != Status::kEnforced)
      return std::string("sandbox: CAPABILITY_NOT_ENFORCED: ") + CapabilityName(id) + " (" + status.detail + ")";
  }
  if (plan.limits.pids_required && !plan.limits.pids_available)
    return "sandbox: CAPABILITY_NOT_ENFORCED: limits.pids (pids.max needs the pids controller; " +
           (plan.cgroup.usable ? plan.cgroup.base + " offers none" : "no cgroup v2 leaf: " + plan.cgroup.detail) + ")";
  return "";
}

// What the gate checks from outside: fresh namespaces, noexec and
// read-only mounts, the inodes under the grants, root's idmapped /etc, the
// job's devices.
GateExpectations PlanGate(const Plan& plan, const cage::RunOptions& options) {
  GateExpectations want;
  want.fresh = {"user", "pid", "ipc", "uts", "mnt", "net"};
  if (plan.writable_noexec) want.noexec = plan.writable_binds;
  want.read_only = plan.read_only_binds;
  for (const auto* binds : {&plan.writable_binds, &plan.read_only_binds})
    for (const auto& path : *binds)
      if (auto it = plan.inodes.find(path); it != plan.inodes.end()) want.inodes.emplace(path, it->second);
  want.root_etc_idmapped = plan.root_etc_view && !options.run_as_uid;
  want.job_devices = plan.job_devices.enabled;
  return want;
}

}  // namespace

JobPlan PlanSupervisedJob(const Policy& policy, const HostFacts& host, const cage::RunOptions& options) {
  JobPlan plan;
  plan.namespaces = PlanJobNamespaces(policy);
  plan.id_maps = PlanIdMaps(host.uid, host.gid, options.run_as_uid, options.run_as_gid);
  plan.refusal = HostRefusal(host, options);
  if (std::string why = PlanConfinementPart(plan, policy, host, options); plan.refusal.empty()) plan.refusal = why;
  if (std::string why = PlanCgroupPart(plan, policy, host, options); plan.refusal.empty()) plan.refusal = why;
  plan.gate = PlanGate(plan.confinement, options);
  return plan;
}

ProbeScope SupervisedProbeScope(const Policy& policy) {
  ProbeScope scope;
  scope.gpu_nodes = policy.gpu() == GpuMode::kCompute;
  return scope;
}

HostFacts ProbeSupervisedHost(int abi_cap, JobNetworkProbeDepth depth, ProbeScope scope) {
  HostFacts host = ProbeHost(abi_cap, scope);
  host.job_network =
      SupervisedJobNetworkFacts(depth != JobNetworkProbeDepth::kNone, depth == JobNetworkProbeDepth::kTrial);
  ProbeRootEtc(host);
  return host;
}

nlohmann::ordered_json JobPlanReport(const JobPlan& plan) {
  const Plan& p = plan.confinement;
  const GateExpectations& gate = plan.gate;
  nlohmann::ordered_json inodes = nlohmann::ordered_json::array();
  for (const auto& [path, id] : gate.inodes) inodes.push_back(path);
  return {
      {"runnable", plan.refusal.empty()},
      {"refusal", plan.refusal},
      {"namespaces", plan.namespaces.Names()},
      {"net", plan.namespaces.net_detail},
      {"uid_map", plan.id_maps.uid_map},
      {"gid_map", plan.id_maps.gid_map},
      {"devices",
       {{"own_devpts", p.job_devices.enabled},
        {"shm_bytes", p.job_devices.shm_bytes},
        {"shm_inodes", p.job_devices.shm_inodes}}},
      {"limits", DescribeLeafLimits(plan.limits)},
      {"gate",
       {{"fresh_namespaces", gate.fresh},
        {"noexec", gate.noexec},
        {"read_only", gate.read_only},
        {"inodes", inodes},
        {"root_etc_idmapped", gate.root_etc_idmapped},
        {"job_devices", gate.job_devices}}},
  };
}

}  // namespace oarbank
