#include "sandbox/plan/plan.h"

#include <algorithm>

#include "sandbox/policy/base_system.h"

namespace oarbank {
namespace {

bool Applies(When when, const Policy& policy, BrokerHandoff broker, bool job_unix) {
  switch (when) {
    case When::kAlways: return true;
    // Pathname unix sockets are confined by RESOLVE_UNIX (ABI 9): to the
    // broker's, or to the job's own sockets (JobUnixSockets).
    case When::kNoBroker: return broker != BrokerHandoff::kPath && !job_unix;
    // ipc "job" lifts net none's and egress-allowlist's socket rows: its
    // network namespace's loopback is the job's own (capabilities.h).
    case When::kNetNone: return policy.net().mode == NetMode::kNone && policy.ipc() == IpcMode::kNone;
    case When::kNetEgressAllowlist:
      return policy.net().mode == NetMode::kEgressAllowlist && policy.ipc() == IpcMode::kNone;
    case When::kInetSockets: return policy.net().mode == NetMode::kEgressAny || policy.ipc() == IpcMode::kJob;
    case When::kNoJobIpc: return policy.ipc() == IpcMode::kNone;
    case When::kNoDebug: return !policy.debug();
    case When::kExecWritableDeny: return !policy.exec_writable();
  }
  return true;
}

// The policy fields a capability enforces, for the list of gaps.
std::vector<std::string> FieldsOf(CapabilityId id, const Policy& policy) {
  switch (id) {
    case CapabilityId::kFilesystem: {
      std::vector<std::string> fields;
      for (const auto& g : policy.grants()) fields.push_back(g.field);
      return fields;
    }
    case CapabilityId::kExecWritableDeny: return {"exec_writable"};
    case CapabilityId::kGpu: return {"devices.gpu"};
    case CapabilityId::kNetNone:
    case CapabilityId::kNetEgressAllowlist:
    case CapabilityId::kNetNoLoopback:
    case CapabilityId::kNetNoLinkLocal:
    case CapabilityId::kNetEgressAny: return {"net.mode"};
    case CapabilityId::kIpcJob: return {"ipc"};
    case CapabilityId::kDebugJob: return {"debug"};
    case CapabilityId::kIpcBrokerOnly: return {"broker"};
    case CapabilityId::kNoNewPrivs:
    case CapabilityId::kSeccomp:
    case CapabilityId::kFilesystemMetadata:
    case CapabilityId::kNetNeverListen:
    case CapabilityId::kIpcUnixSockets:
    case CapabilityId::kIpcScoping:
    case CapabilityId::kChildrenNoNamespaces:
    case CapabilityId::kProcessContainer:
    case CapabilityId::kLimitsMemory:
    case CapabilityId::kLimitsCpu:
    case CapabilityId::kHideExistence:
    case CapabilityId::kBatteryProven: return {std::string("(always-on) ") + CapabilityName(id)};
  }
  return {};
}

}  // namespace

bool JobUnixSockets(const Policy& policy, LandlockAbi abi) {
  return policy.ipc() == IpcMode::kJob && (HandledFs(abi) & kFsResolveUnix) != 0;
}

uint64_t ReadExecuteRights(LandlockAbi abi) { return HandledFs(abi) & (kFsExecute | kFsReadFile | kFsReadDir); }

uint64_t ReadWriteRights(LandlockAbi abi, bool exec_writable) {
  // Every file right but execute (unless exec_writable), MAKE_CHAR and
  // MAKE_BLOCK and IOCTL_DEV (no device lives in a work directory; a node
  // made there would open whatever its numbers name, and a whiteout is
  // refused with them), and RESOLVE_UNIX (granted on the broker's socket
  // alone; a job's own sockets need no grant: JobUnixSockets).
  uint64_t rights = HandledFs(abi) & ~(kFsMakeChar | kFsMakeBlock | kFsIoctlDev | kFsResolveUnix);
  if (!exec_writable) rights &= ~kFsExecute;
  return rights;
}

uint64_t DeviceRights(LandlockAbi abi) { return HandledFs(abi) & (kFsReadFile | kFsWriteFile); }

uint64_t GpuRights(LandlockAbi abi) {
  // /dev/dri is a directory (read it to find the render nodes); the nodes
  // need ioctls, which ABI 5+ otherwise refuses on devices.
  return HandledFs(abi) & (kFsReadFile | kFsWriteFile | kFsReadDir | kFsIoctlDev);
}

const char* BrokerHandoffName(BrokerHandoff handoff) {
  switch (handoff) {
    case BrokerHandoff::kNone: return "none";
    case BrokerHandoff::kInheritedFd: return "inherited-fd";
    case BrokerHandoff::kPath: return "path";
  }
  return "?";
}

ProbeScope LaunchProbeScope(const Policy& policy) {
  ProbeScope scope;
  scope.cgroup = false;
  switch (policy.gpu()) {
    case GpuMode::kNone: scope.gpu_nodes = false; break;
    case GpuMode::kCompute: scope.gpu_nodes = true; break;
  }
  return scope;
}

namespace {

// The Landlock rules at the host's ABI: the base system, the policy's
// grants, the GPU nodes, the broker's socket and the proxy's port.
LandlockPlan PlanLandlock(const Policy& policy, const HostFacts& host) {
  const LandlockAbi abi = ToAbi(host.landlock_abi);
  LandlockPlan ll;
  ll.abi = abi;
  ll.handled_fs = HandledFs(abi);
  ll.handled_net = HandledNet(abi);
  // egress-any: any TCP port and, from ABI 10, any UDP destination; its job
  // network's ruleset decides by address (job_network.h). Bind stays
  // handled (and refused by seccomp too). Under every other mode UDP is
  // handled with no rule from ABI 10: a second layer under the seccomp rows
  // that refuse UDP sockets there.
  if (policy.net().mode == NetMode::kEgressAny) ll.handled_net &= ~(kNetConnectTcp | kNetConnectSendUdp);
  // ipc "job": TCP and UDP on the job's own loopback, bind and connect on any
  // port; the job's network namespace, which holds nothing else (and the
  // egress proxy's listener under egress-allowlist), is what confines them.
  // Landlock's port rules would refuse the job's own servers and add
  // nothing: no port there leads out but the proxy's.
  if (policy.ipc() == IpcMode::kJob) ll.handled_net = 0;
  ll.scoped = HandledScopes(abi);
  if (abi != LandlockAbi::kNone) {
    for (auto base : kBaseReadExecute) {
      // Root owns /etc's root-only files: root sees /etc through the
      // idmapped view (mounted below), or else the /etc grant is narrowed
      // to its world-readable parts; listing /etc stays allowed.
      if (base == "/etc" && host.runs_as_root && !host.etc_view.idmap) {
        ll.paths.push_back({"/etc", HandledFs(abi) & kFsReadDir, true, "base system"});
        for (const auto& part : host.etc_world_readable)
          if (part != "/etc") ll.paths.push_back({part, ReadExecuteRights(abi), true, "base system /etc"});
        if (std::find(host.etc_world_readable.begin(), host.etc_world_readable.end(), "/etc") ==
            host.etc_world_readable.end())
          continue;
      }
      ll.paths.push_back({std::string(base), ReadExecuteRights(abi), true, "base system"});
    }
    for (auto dev : kBaseDevices) ll.paths.push_back({std::string(dev), DeviceRights(abi), true, "base device"});
    for (const auto& g : policy.grants()) {
      const uint64_t rights =
          g.access == Access::kReadExecute ? ReadExecuteRights(abi) : ReadWriteRights(abi, policy.exec_writable());
      ll.paths.push_back({g.path, rights, false, g.field, true, g.inode});
    }
    switch (policy.gpu()) {
      case GpuMode::kNone: break;
      case GpuMode::kCompute:
        for (const auto& node : host.gpu_nodes) ll.paths.push_back({node, GpuRights(abi), true, "devices.gpu"});
        break;
    }
    // The broker socket: on ABI 9 the only pathname unix socket reachable;
    // below it an inherited connection (BrokerHandoff).
    if (policy.broker() && (ll.handled_fs & kFsResolveUnix))
      ll.paths.push_back({*policy.broker(), kFsResolveUnix, false, "broker", true});
    // TCP: egress goes to the agent's proxy port alone; nothing binds.
    if (ll.handled_net != 0 && policy.net().mode == NetMode::kEgressAllowlist)
      ll.ports.push_back({static_cast<uint16_t>(policy.net().proxy_port), kNetConnectTcp, "net.proxy_port"});
  }
  return ll;
}

// The mount namespace: everything read-only but the writable grants
// (filesystem.metadata), which are noexec unless exec_writable; the
// read-only carve-outs; root's idmapped /etc.
void PlanMounts(const Policy& policy, const HostFacts& host, Plan& plan) {
  const LandlockAbi abi = plan.landlock.abi;
  plan.read_only_mounts = true;
  for (const auto& g : policy.grants())
    if (g.access == Access::kReadWrite) {
      plan.writable_binds.push_back(g.path);
      plan.inodes[g.path] = g.inode;
    }
  // A grant inside another is bound after it, or the outer bind would hide it.
  std::stable_sort(plan.writable_binds.begin(), plan.writable_binds.end(),
                   [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  for (const auto& r : policy.read_only()) {
    plan.read_only_binds.push_back(r.path);
    plan.inodes[r.path] = r.inode;
  }
  plan.writable_noexec = !policy.exec_writable();
  plan.root_etc_view = host.runs_as_root && host.etc_view.idmap && abi != LandlockAbi::kNone;
}

// The rows that apply to the policy, for the host's architecture: a row
// whose syscall it lacks is dropped with the reason, and every number above
// the syscall table's highest answers ENOSYS.
void PlanSeccomp(const Policy& policy, const HostFacts& host, Plan& plan) {
  plan.seccomp_arch = SeccompArchOf(host.arch).value_or(NativeSeccompArch());
  plan.seccomp_highest = HighestSyscall(plan.seccomp_arch);
  plan.seccomp.reserve(SeccompRuleTable().size());
  for (const auto& rule : SeccompRuleTable()) {
    if (!Applies(rule.when, policy, plan.broker, JobUnixSockets(policy, plan.landlock.abi))) continue;
    if (SyscallNumber(rule.syscall, plan.seccomp_arch) >= 0) {
      plan.seccomp.push_back(rule);
      continue;
    }
    plan.seccomp_dropped.push_back({rule, rule.syscall + " is not a syscall of " + SeccompArchName(plan.seccomp_arch) +
                                              " in this build's table (" + SyscallTableSource() + ", up to " +
                                              std::to_string(plan.seccomp_highest) + ")"});
  }
}

}  // namespace

Plan PlanConfinement(const Policy& policy, const HostFacts& host) {
  Plan plan;
  plan.placement = Place(policy, host);
  if (policy.broker())
    plan.broker =
        (HandledFs(ToAbi(host.landlock_abi)) & kFsResolveUnix) ? BrokerHandoff::kPath : BrokerHandoff::kInheritedFd;
  plan.landlock = PlanLandlock(policy, host);
  // What is not enforced, field by field: every grant is enforced by the
  // plan's rules or listed here (and then the launcher refuses to run).
  for (const auto& fault : plan.placement.at_fault)
    for (auto& field : FieldsOf(fault.id, policy)) plan.gaps.push_back({std::move(field), fault.id, fault.detail});
  PlanMounts(policy, host, plan);
  PlanSeccomp(policy, host, plan);
  return plan;
}

void PlanJobDevices(Plan& plan, uint64_t shm_bytes) {
  plan.job_devices.enabled = true;
  plan.job_devices.shm_bytes = shm_bytes;
  plan.job_devices.shm_inodes = kShmInodes;
  LandlockPlan& ll = plan.landlock;
  if (ll.abi == LandlockAbi::kNone) return;
  const uint64_t terminal = ll.handled_fs & (kFsReadFile | kFsWriteFile | kFsIoctlDev);
  // The instance's own ptys (listing them shows only the job's), its ptmx,
  // and the controlling terminal, which in a new session is the job's own
  // or none. Opened by path when Landlock is applied, after the mounts: the
  // rules sit on the job's instance, never on the host's.
  ll.paths.push_back({"/dev/pts", terminal | (ll.handled_fs & kFsReadDir), false, "job devpts"});
  ll.paths.push_back({"/dev/ptmx", terminal, false, "job devpts"});
  ll.paths.push_back({"/dev/tty", terminal, true, "job terminal"});
  // Shared memory and semaphores: files, never devices, never executed.
  ll.paths.push_back({"/dev/shm", ReadWriteRights(ll.abi, false), false, "job /dev/shm"});
}

}  // namespace oarbank
