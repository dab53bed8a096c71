#include "sandbox/plan/report.h"

#include <cstdio>

#include "sandbox/plan/attestation.h"
#include "sandbox/seccomp/filter.h"

namespace oarbank {
namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

// Landlock's errata (the kernel's security/landlock/errata/), and what a
// kernel without each fix means for this cage.
struct Erratum {
  int number;
  const char* what;
  const char* without_fix;
};
constexpr Erratum kLandlockErrata[] = {
    {1, "TCP socket identification (ABI 4)",
     "TCP rules also restrict MPTCP, SMC and SCTP streams: stricter, and seccomp refuses those sockets anyway"},
    {2, "scoped signal handling (ABI 6)",
     "threads of one process in different domains cannot signal each other: stricter, never weaker"},
    {3, "disconnected directory handling (ABI 1)",
     "rename or link can widen rights through a directory moved out from under a bind mount; in the cage every "
     "mount but the writable grants is read-only and each grant is a mount of its own, so no process inside can "
     "move a directory out from under one"},
    {4, "the right a whiteout needs (renameat2 RENAME_WHITEOUT)",
     "renameat2(RENAME_WHITEOUT) makes a whiteout (a character device) with MAKE_REG alone while mknod of one "
     "asks MAKE_CHAR; with the fix both ask MAKE_REG, which writable grants have (whiteout_needs says what this "
     "kernel asks): the seccomp filter refuses RENAME_WHITEOUT and mknod of a character device 0:0, so the cage "
     "never relies on either"},
};

nlohmann::ordered_json ErrataReport(const HostFacts& h) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& e : kLandlockErrata) {
    const bool fixed = (h.landlock_errata >> (e.number - 1)) & 1;
    out.push_back({{"erratum", e.number},
                   {"what", e.what},
                   {"fixed", !h.landlock_errata_known ? nlohmann::ordered_json("unknown: the kernel cannot be asked")
                                                      : nlohmann::ordered_json(fixed)},
                   {"without_the_fix", e.without_fix}});
  }
  return out;
}

}  // namespace

nlohmann::ordered_json HostReport(const HostFacts& h) {
  nlohmann::ordered_json caps = nlohmann::ordered_json::array();
  for (const auto& c : AssessAll(h))
    caps.push_back({{"id", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
  const SeccompArch arch = SeccompArchOf(h.arch).value_or(NativeSeccompArch());
  return {
      {"kernel", {{"release", h.kernel_release}, {"arch", h.arch}}},
      {"landlock",
       {{"abi", h.landlock_abi},
        {"kernel_abi", h.landlock_kernel_abi},
        {"capped", h.landlock_capped},
        {"missing", h.landlock_missing},
        {"whiteout_needs", h.landlock_whiteout_needs.empty() ? "not tried" : h.landlock_whiteout_needs},
        {"errata", h.landlock_errata},
        {"errata_detail", ErrataReport(h)}}},
      {"seccomp",
       {{"filter", h.seccomp_filter},
        {"actions", h.seccomp_actions},
        {"syscall_table",
         {{"arch", SeccompArchName(arch)}, {"source", SyscallTableSource()}, {"highest", HighestSyscall(arch)}}}}},
      {"user_namespaces", {{"available", h.user_namespaces}, {"detail", h.user_namespaces_detail}}},
      {"cgroup_v2",
       {{"mounted", h.cgroup.v2_mounted},
        {"mount_point", h.cgroup.mount_point},
        {"own_cgroup", h.cgroup.own_path},
        {"writable", h.cgroup.writable},
        {"controllers", h.cgroup.controllers},
        {"cgroup_kill", h.cgroup.has_kill},
        {"error", h.cgroup.error}}},
      {"gpu_nodes", h.gpu_nodes},
      {"root_etc",
       !h.runs_as_root ? nlohmann::ordered_json{{"mode", "not root"}}
       : h.etc_view.idmap
           ? nlohmann::ordered_json{{"mode", "idmapped"}, {"detail", "root sees /etc with root owning nothing"}}
           : nlohmann::ordered_json{{"mode", "narrowed"},
                                    {"detail", "no idmapped mount (" + h.etc_view.detail +
                                                   "): the /etc grant is its world-readable parts"}}},
      {"capabilities", caps},
  };
}

nlohmann::ordered_json PlanReport(const Plan& plan) {
  nlohmann::ordered_json at_fault = nlohmann::ordered_json::array();
  for (const auto& c : plan.placement.at_fault)
    at_fault.push_back({{"id", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
  nlohmann::ordered_json paths = nlohmann::ordered_json::array();
  for (const auto& p : plan.landlock.paths)
    paths.push_back({{"path", p.path}, {"access", Hex(p.access)}, {"source", p.source}, {"optional", p.optional}});
  nlohmann::ordered_json ports = nlohmann::ordered_json::array();
  for (const auto& p : plan.landlock.ports)
    ports.push_back({{"port", p.port}, {"access", Hex(p.access)}, {"source", p.source}});
  nlohmann::ordered_json seccomp = nlohmann::ordered_json::array();
  for (const auto& r : plan.seccomp)
    seccomp.push_back({{"syscall", r.syscall},
                       {"condition", DescribeCondition(r)},
                       {"errno", r.err},
                       {"when", WhenName(r.when)},
                       {"why", r.why}});
  nlohmann::ordered_json dropped = nlohmann::ordered_json::array();
  for (const auto& d : plan.seccomp_dropped) dropped.push_back({{"syscall", d.rule.syscall}, {"why", d.reason}});
  nlohmann::ordered_json gaps = nlohmann::ordered_json::array();
  for (const auto& g : plan.gaps)
    gaps.push_back({{"field", g.field}, {"capability", CapabilityName(g.capability)}, {"detail", g.detail}});
  return {
      {"placement", {{"verdict", VerdictName(plan.placement.verdict)}, {"at_fault", at_fault}}},
      {"plan",
       {{"landlock",
         {{"abi", static_cast<int>(plan.landlock.abi)},
          {"handled_fs", Hex(plan.landlock.handled_fs)},
          {"handled_net", Hex(plan.landlock.handled_net)},
          {"scoped", Hex(plan.landlock.scoped)},
          {"paths", paths},
          {"ports", ports}}},
        {"mount_namespace",
         {{"read_only_mounts", plan.read_only_mounts},
          {"writable_binds", plan.writable_binds},
          {"writable_noexec", plan.writable_noexec},
          {"read_only_binds", plan.read_only_binds},
          {"root_etc_idmapped", plan.root_etc_view}}},
        {"broker", BrokerHandoffName(plan.broker)},
        // "built": the program the build compiled for exactly these rows is
        // what the launcher loads; "compiled at launch" otherwise.
        {"seccomp",
         {{"default", "allow"},
          {"bad_arch", "kill_process"},
          {"arch", SeccompArchName(plan.seccomp_arch)},
          {"syscall_table", SyscallTableSource()},
          {"highest_syscall", plan.seccomp_highest},
          {"above_table", "ENOSYS"},
          {"program", PrecompiledSeccomp(plan.seccomp, plan.seccomp_arch).empty() ? "compiled at launch" : "built"},
          {"rules", seccomp},
          {"dropped", dropped}}},
        {"gaps", gaps}}},
  };
}

nlohmann::ordered_json GrantReport(const Policy& policy, const HostFacts& host) {
  const Attestation attestation = ReadAttestationForThisProcess(AttestationPath(), host);
  const Placement grant = PlaceForGrant(policy, host, attestation);
  nlohmann::ordered_json at_fault = nlohmann::ordered_json::array();
  for (const auto& c : grant.at_fault)
    at_fault.push_back({{"id", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
  return {{"grant",
           {{"verdict", VerdictName(grant.verdict)},
            {"class", PolicyClass(policy)},
            {"attestation", AttestationPath()},
            {"at_fault", at_fault}}}};
}

}  // namespace oarbank
