#include "sandbox/plan/capabilities.h"

#include <algorithm>
#include <optional>
#include <string>

#include "sandbox/host/landlock_abi.h"
#include "sandbox/plan/attestation.h"

namespace oarbank {
namespace {

CapabilityStatus Enforced(CapabilityId id, std::string detail) { return {id, Status::kEnforced, std::move(detail)}; }
CapabilityStatus Unavailable(CapabilityId id, std::string detail) {
  return {id, Status::kUnavailable, std::move(detail)};
}

// Landlock at `need` or newer; the detail names the kernel that brings it.
CapabilityStatus NeedsAbi(CapabilityId id, const HostFacts& h, int need, const char* linux_version, const char* what) {
  const std::string needs = "Landlock ABI " + std::to_string(need) + " (Linux " + linux_version + ")";
  if (h.landlock_abi >= need)
    return Enforced(id,
                    std::string(what) + " (" + needs + "; this host has ABI " + std::to_string(h.landlock_abi) + ")");
  return Unavailable(
      id, std::string(what) + " needs " + needs + "; this host has " +
              (h.landlock_abi == 0 ? std::string("no Landlock") : "ABI " + std::to_string(h.landlock_abi)) +
              (h.landlock_capped ? " (capped for testing)" : "") +
              (h.landlock_missing.empty() ? std::string()
                                          : " (the kernel reports ABI " + std::to_string(h.landlock_kernel_abi) +
                                                " but refuses a ruleset with " + h.landlock_missing + ")"));
}

CapabilityStatus NeedsSeccomp(CapabilityId id, const HostFacts& h, const std::string& what) {
  if (h.seccomp_filter) return Enforced(id, what + " (seccomp filter)");
  return Unavailable(id, what + " needs seccomp filters (CONFIG_SECCOMP_FILTER)");
}

bool HasController(const HostFacts& h, const char* name) {
  return std::find(h.cgroup.controllers.begin(), h.cgroup.controllers.end(), name) != h.cgroup.controllers.end();
}

CapabilityStatus CgroupLimit(CapabilityId id, const HostFacts& h, const char* controller, const char* file) {
  if (!h.cgroup.probed)
    return Unavailable(id, std::string(file) + " needs a cgroup v2 hierarchy; this probe did not look");
  if (!h.cgroup.error.empty())
    return Unavailable(
        id, std::string(file) + " needs a cgroup v2 hierarchy; what says so cannot be read: " + h.cgroup.error);
  if (!h.cgroup.v2_mounted) return Unavailable(id, std::string(file) + " needs a cgroup v2 hierarchy; none is mounted");
  if (!h.cgroup.writable)
    return Unavailable(id, std::string(file) + " needs a delegated cgroup v2 subtree; " + h.cgroup.own_path +
                               " is not writable by this process");
  if (!HasController(h, controller))
    return Unavailable(
        id, std::string(file) + " needs the " + controller + " controller; " + h.cgroup.own_path + " offers none");
  return Enforced(id, std::string(file) + " in a cgroup v2 leaf below " + h.cgroup.own_path);
}

// What only a job of run has (namespaces of its own): unavailable to
// sandbox-exec alone (`alone` says why) and without user namespaces.
std::optional<CapabilityStatus> NeedsJobNamespaces(CapabilityId id, const HostFacts& h, const char* alone) {
  if (!h.job_network.supervised) return Unavailable(id, std::string("sandbox-exec alone: ") + alone);
  if (!h.user_namespaces) return Unavailable(id, "user namespaces: " + h.user_namespaces_detail);
  return std::nullopt;
}

}  // namespace

const char* CapabilityName(CapabilityId id) {
  switch (id) {
    case CapabilityId::kNoNewPrivs: return "no_new_privs";
    case CapabilityId::kSeccomp: return "seccomp";
    case CapabilityId::kFilesystem: return "filesystem";
    case CapabilityId::kFilesystemMetadata: return "filesystem.metadata";
    case CapabilityId::kExecWritableDeny: return "exec_writable.deny";
    case CapabilityId::kGpu: return "devices.gpu";
    case CapabilityId::kNetNone: return "net.none";
    case CapabilityId::kNetEgressAllowlist: return "net.egress-allowlist";
    case CapabilityId::kNetNoLoopback: return "net.no-loopback";
    case CapabilityId::kNetNoLinkLocal: return "net.no-link-local";
    case CapabilityId::kNetNeverListen: return "net.never-listen";
    case CapabilityId::kNetEgressAny: return "net.egress-any";
    case CapabilityId::kIpcUnixSockets: return "ipc.unix-sockets";
    case CapabilityId::kIpcBrokerOnly: return "ipc.broker-only";
    case CapabilityId::kIpcScoping: return "ipc.scoping";
    case CapabilityId::kIpcJob: return "ipc.job-loopback";
    case CapabilityId::kDebugJob: return "debug.job-ptrace";
    case CapabilityId::kChildrenNoNamespaces: return "children.no-namespaces";
    case CapabilityId::kProcessContainer: return "process.container";
    case CapabilityId::kLimitsMemory: return "limits.memory";
    case CapabilityId::kLimitsCpu: return "limits.cpu";
    case CapabilityId::kHideExistence: return "filesystem.hide-existence";
    case CapabilityId::kBatteryProven: return "battery.proven";
  }
  return "?";
}

const char* StatusName(Status status) {
  switch (status) {
    case Status::kEnforced: return "enforced";
    case Status::kCooperative: return "cooperative";
    case Status::kUnavailable: return "unavailable";
  }
  return "?";
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk: return "ok";
    case Verdict::kBackendMissing: return "SANDBOX_BACKEND_MISSING";
    case Verdict::kCapabilityNotEnforced: return "CAPABILITY_NOT_ENFORCED";
  }
  return "?";
}

std::vector<CapabilityId> AllCapabilities() {
  return {CapabilityId::kNoNewPrivs,       CapabilityId::kSeccomp,
          CapabilityId::kFilesystem,       CapabilityId::kFilesystemMetadata,
          CapabilityId::kExecWritableDeny, CapabilityId::kGpu,
          CapabilityId::kNetNone,          CapabilityId::kNetEgressAllowlist,
          CapabilityId::kNetNoLoopback,    CapabilityId::kNetNoLinkLocal,
          CapabilityId::kNetNeverListen,   CapabilityId::kNetEgressAny,
          CapabilityId::kIpcUnixSockets,   CapabilityId::kIpcBrokerOnly,
          CapabilityId::kIpcScoping,       CapabilityId::kIpcJob,
          CapabilityId::kDebugJob,         CapabilityId::kChildrenNoNamespaces,
          CapabilityId::kProcessContainer, CapabilityId::kLimitsMemory,
          CapabilityId::kLimitsCpu,        CapabilityId::kHideExistence};
}

// The table. Each row names the kernel feature that enforces the capability.
CapabilityStatus Assess(CapabilityId id, const HostFacts& h) {
  switch (id) {
    case CapabilityId::kNoNewPrivs:
      return Enforced(id, "prctl(PR_SET_NO_NEW_PRIVS) and every capability dropped before exec");
    case CapabilityId::kSeccomp: return NeedsSeccomp(id, h, "syscall deny-list, foreign and x32 ABIs killed");
    case CapabilityId::kFilesystem:
      return NeedsAbi(id, h, 3, "6.2", "read/write/execute limited to the grants, truncate included");
    case CapabilityId::kFilesystemMetadata:
      // Landlock has no right for these: chmod, chown, utimensat and
      // setxattr need no open, only the file's owner (or its write
      // permission, for user.* attributes).
      if (!h.user_namespaces)
        return Unavailable(id,
                           "Landlock has no right for a file's mode, owner, times or extended attributes, so "
                           "every mount but the writable grants must be read-only in a private mount namespace; "
                           "user namespaces: " +
                               h.user_namespaces_detail);
      return Enforced(id,
                      "modes, owners, times and extended attributes change in the writable grants alone: every "
                      "other mount is read-only in a private mount namespace");
    case CapabilityId::kExecWritableDeny: {
      auto s = NeedsAbi(id, h, 3, "6.2", "no execute right on writable grants");
      if (s.status != Status::kEnforced) return s;
      if (!h.seccomp_filter) return NeedsSeccomp(id, h, "memfd_create and execveat(AT_EMPTY_PATH) refused");
      if (!h.user_namespaces)
        return Unavailable(id,
                           "the dynamic loader maps written files with read rights, so writable grants must be "
                           "mounted noexec in a private mount namespace; user namespaces: " +
                               h.user_namespaces_detail);
      return Enforced(id,
                      "Landlock withholds execute, writable grants bound noexec in a private mount namespace, "
                      "memfd_create and execveat(AT_EMPTY_PATH) refused");
    }
    case CapabilityId::kGpu: return NeedsAbi(id, h, 3, "6.2", "only /dev/dri, /dev/nvidia* and /dev/kfd");
    case CapabilityId::kNetNone: {
      auto s = NeedsAbi(id, h, 3, "6.2", "no IPv4/IPv6 socket");
      return s.status == Status::kEnforced ? NeedsSeccomp(id, h, "IPv4 and IPv6 sockets refused") : s;
    }
    case CapabilityId::kNetEgressAllowlist: {
      auto s = NeedsAbi(id, h, 4, "6.7", "TCP connect to the proxy port alone, no bind");
      return s.status == Status::kEnforced
                 ? NeedsSeccomp(id, h, "IPv4/IPv6 stream sockets only, TCP via the proxy port")
                 : s;
    }
    case CapabilityId::kNetNoLoopback: return NeedsAbi(id, h, 4, "6.7", "no loopback port but the proxy's");
    case CapabilityId::kNetNoLinkLocal:
      return NeedsAbi(id, h, 4, "6.7", "no link-local address (TCP only to the proxy port)");
    case CapabilityId::kNetNeverListen: return NeedsSeccomp(id, h, "listen and bind refused");
    case CapabilityId::kNetEgressAny:
      if (auto no = NeedsJobNamespaces(id, h,
                                       "Landlock filters ports, not addresses, so loopback and link-local cannot be "
                                       "refused; under run a network namespace of the job's own enforces it "
                                       "(supervisor.net_egress_any)"))
        return *no;
      if (!h.job_network.ok) return Unavailable(id, "missing " + h.job_network.missing + ": " + h.job_network.detail);
      return Enforced(id,
                      "a network namespace of the job's own, its only way out slirp4netns (run by the agent); an "
                      "nftables ruleset drops every destination that is not public but the stack's resolver, and "
                      "all inbound but replies; verified from outside by the gate");
    case CapabilityId::kIpcUnixSockets:
      return NeedsSeccomp(id, h, "socket(AF_UNIX) and datagram socketpairs refused; stream pairs allowed");
    case CapabilityId::kIpcBrokerOnly:
      // ABI 9: the module connects by path and Landlock lets it reach the
      // broker alone. Below: socket(AF_UNIX) stays refused and the module
      // holds one inherited connection to the broker (plan.h BrokerHandoff).
      if (h.landlock_abi >= 9)
        return NeedsAbi(id, h, 9, "7.1",
                        "pathname unix connects limited to the broker socket, OARBANK_BROKER=unix:/path");
      return NeedsSeccomp(id, h,
                          "socket(AF_UNIX) refused; the module inherits one connection to the broker, "
                          "OARBANK_BROKER=fd:N (pathname connects need Landlock ABI 9, Linux 7.1)");
    case CapabilityId::kIpcJob:
      if (auto no = NeedsJobNamespaces(id, h,
                                       "the job would share the caller's network namespace, whose loopback is the "
                                       "host's; under run a network namespace of the job's own holds it "
                                       "(supervisor.ipc_job)"))
        return *no;
      return NeedsSeccomp(
          id, h,
          std::string("a network namespace of the job's own whose only interface is its loopback "
                      "(and the egress proxy's listener under egress-allowlist): TCP and UDP there, "
                      "bind and listen included, reach nothing outside and nothing outside reaches "
                      "them; ") +
              (h.landlock_abi >= 9 ? "unix sockets of the job's own, a pathname one reachable only when the job's "
                                     "processes bound it (Landlock RESOLVE_UNIX, ABI 9)"
                                   : "unix sockets stay refused (confining a connect by path needs Landlock ABI 9, "
                                     "Linux 7.1)") +
              ". For cage and for run policies that ask: outside the module contract (never "
              "listening), manifest-policy never emits it");
    case CapabilityId::kDebugJob:
      if (auto no = NeedsJobNamespaces(id, h,
                                       "the job would share the caller's pid namespace, where its processes could "
                                       "trace the caller's; under run the job's own pid namespace holds it "
                                       "(supervisor.debug_job)"))
        return *no;
      return NeedsAbi(id, h, 1, "5.13",
                      "ptrace and process_vm_readv/writev of the job's own processes only: its pid namespace shows "
                      "nothing else, its init is not dumpable, Landlock scopes ptrace to the job's domain; "
                      "pidfd_getfd and kcmp stay refused, and seccomp never hands a call to a tracer");
    case CapabilityId::kIpcScoping:
      return NeedsAbi(id, h, 6, "6.12", "abstract unix sockets and signals scoped to the sandbox");
    case CapabilityId::kChildrenNoNamespaces:
      return NeedsSeccomp(id, h, "unshare, setns, mount, namespace clone flags refused; clone3 answers ENOSYS");
    case CapabilityId::kProcessContainer:
      if (h.cgroup.v2_mounted && h.cgroup.writable && h.cgroup.has_kill)
        return Enforced(id, "cgroup v2 leaf with cgroup.kill below " + h.cgroup.own_path);
      if (h.user_namespaces) return Enforced(id, "pid namespace: the job dies with its init");
      return {id, Status::kCooperative, "process group only: a process can leave it with setsid"};
    case CapabilityId::kLimitsMemory: return CgroupLimit(id, h, "memory", "memory.max");
    case CapabilityId::kLimitsCpu: return CgroupLimit(id, h, "cpu", "cpu.max");
    case CapabilityId::kHideExistence:
      return Unavailable(id, "not promised: Landlock does not restrict stat, so which files exist is visible");
    case CapabilityId::kBatteryProven:
      return Unavailable(id, "proven per policy class by oarbank-conform (see PlaceForGrant)");
  }
  return Unavailable(id, "unknown capability");
}

std::vector<CapabilityStatus> AssessAll(const HostFacts& host) {
  std::vector<CapabilityStatus> all;
  for (auto id : AllCapabilities()) all.push_back(Assess(id, host));
  return all;
}

std::vector<CapabilityId> AlwaysOnCapabilities() {
  // Always on, whatever the grants (the module contract).
  return {CapabilityId::kNoNewPrivs,     CapabilityId::kSeccomp,
          CapabilityId::kFilesystem,     CapabilityId::kFilesystemMetadata,
          CapabilityId::kNetNeverListen, CapabilityId::kIpcUnixSockets,
          CapabilityId::kIpcScoping,     CapabilityId::kChildrenNoNamespaces};
}

std::vector<CapabilityId> RequiredCapabilities(const Policy& policy) {
  std::vector<CapabilityId> need = AlwaysOnCapabilities();
  if (policy.debug()) need.push_back(CapabilityId::kDebugJob);
  if (policy.ipc() == IpcMode::kJob) {
    // The job's own loopback in place of never listening and of the net
    // mode's socket and port rules: its network namespace confines both.
    std::erase(need, CapabilityId::kNetNeverListen);
    need.push_back(CapabilityId::kIpcJob);
  } else {
    switch (policy.net().mode) {
      case NetMode::kNone: need.push_back(CapabilityId::kNetNone); break;
      case NetMode::kEgressAllowlist:
        need.insert(need.end(),
                    {CapabilityId::kNetEgressAllowlist, CapabilityId::kNetNoLoopback, CapabilityId::kNetNoLinkLocal});
        break;
      case NetMode::kEgressAny: need.push_back(CapabilityId::kNetEgressAny); break;
    }
  }
  if (!policy.exec_writable()) need.push_back(CapabilityId::kExecWritableDeny);
  switch (policy.gpu()) {
    case GpuMode::kNone: break;
    case GpuMode::kCompute: need.push_back(CapabilityId::kGpu); break;
  }
  if (policy.broker()) need.push_back(CapabilityId::kIpcBrokerOnly);
  return need;
}

Placement Place(const Policy& policy, const HostFacts& host) {
  return PlaceCapabilities(RequiredCapabilities(policy), host);
}

Placement PlaceCapabilities(const std::vector<CapabilityId>& need, const HostFacts& host) {
  Placement placement;
  for (auto id : need) {
    auto s = Assess(id, host);
    if (s.status != Status::kEnforced) placement.at_fault.push_back(std::move(s));
  }
  if (host.landlock_abi == 0 || !host.seccomp_filter)
    placement.verdict = Verdict::kBackendMissing;
  else if (!placement.at_fault.empty())
    placement.verdict = Verdict::kCapabilityNotEnforced;
  return placement;
}

Placement PlaceForGrant(const Policy& policy, const HostFacts& host, const Attestation& attestation) {
  Placement placement = Place(policy, host);
  if (std::string gap = ProofGap(attestation, policy); !gap.empty()) {
    constexpr std::string_view kPrefix = "battery.proven: ";
    if (gap.rfind(kPrefix, 0) == 0) gap.erase(0, kPrefix.size());
    placement.at_fault.push_back({CapabilityId::kBatteryProven, Status::kUnavailable, gap});
    if (placement.verdict == Verdict::kOk) placement.verdict = Verdict::kCapabilityNotEnforced;
  }
  return placement;
}

std::string PlacementLine(const Placement& placement) {
  std::string line = std::string("sandbox: ") + VerdictName(placement.verdict);
  for (size_t i = 0; i < placement.at_fault.size(); ++i)
    line += std::string(i == 0 ? ": " : "; ") + CapabilityName(placement.at_fault[i].id) + " (" +
            placement.at_fault[i].detail + ")";
  return line;
}

}  // namespace oarbank
