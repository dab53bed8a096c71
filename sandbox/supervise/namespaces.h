// The job's namespaces, created rootless: a fresh user namespace (which
// grants the namespaced privilege to make the others), pid, ipc, uts and
// mount, and for net = none an empty network namespace on top of the
// seccomp rule; for egress-allowlist a network namespace of its own whose
// only listener is the agent's egress proxy. The first process in the pid namespace is the supervisor's
// init (supervisor.cc): it mounts a fresh /proc that shows only the job,
// reaps, and when it dies the kernel kills every process left in the
// namespace, however it was forked or whatever session it made.
//
// Kernel limits: an unprivileged process may map only its own uid and gid
// (and must write "deny" to setgroups first); where user namespaces are
// refused (user.max_user_namespaces = 0, Debian's
// kernel.unprivileged_userns_clone = 0, Ubuntu's AppArmor restriction) the
// supervisor refuses the job: there is no quiet fallback to a launch
// without them.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "sandbox/policy/policy.h"

namespace oarbank {

// Every job gets fresh user, pid, ipc, uts, mount and network namespaces;
// what its network namespace holds depends on net.mode.
struct NamespacePlan {
  int clone_flags = 0;           // CLONE_NEW* for clone(2)
  bool egress_listener = false;  // in it, init listens on 127.0.0.1:<net.proxy_port> for the agent's proxy
  bool job_network = false;      // egress-any: the agent's stack and ruleset on it (job_network.h)
  std::string net_detail;        // what the network namespace holds, and why
  std::string Names() const;     // "user,pid,ipc,uts,mnt,net"
};

// Pure: the namespaces a job of this policy gets. net = none: an empty
// network namespace (loopback down, no route anywhere). egress-allowlist: a
// fresh network namespace with `lo` up, whose only listener is the agent's
// egress proxy on 127.0.0.1:<net.proxy_port> (job_egress.h): Landlock ABI 4
// limits TCP by port alone, and here no other address is reachable.
NamespacePlan PlanJobNamespaces(const Policy& policy);

// The uid/gid maps the supervisor writes for the job's user namespace:
// identity maps of the supervisor's own ids (what an unprivileged process
// may write), plus `run_as` when the supervisor is root.
struct IdMaps {
  std::string uid_map;
  std::string gid_map;
  bool deny_setgroups = true;  // required unless the writer holds CAP_SETGID outside
};
IdMaps PlanIdMaps(uid_t uid, gid_t gid, std::optional<uid_t> run_as_uid, std::optional<gid_t> run_as_gid);

// Like fork(2) (returns 0 in the child), with the child in the namespaces
// of `clone_flags`. Raw clone: the caller must be single-threaded and the
// child must stay on async-signal-safe calls until it forks again.
// With `cgroup_fd` (a cgroup2 directory) the child starts in that cgroup
// (clone3 with CLONE_INTO_CGROUP, Linux 5.7): no window outside it, and no
// migration through cgroup.procs after. `*placed` says whether that
// happened; where it cannot (an older kernel, no permission), the child is
// made as without it and the caller moves it.
pid_t CloneIntoNamespaces(int clone_flags, int cgroup_fd = -1, bool* placed = nullptr);

// FromParent: writes setgroups, uid_map and gid_map of `pid`. Returns 0 or
// the errno, with the file that refused it in `what`.
int WriteIdMapsFromParent(pid_t pid, const IdMaps& maps, const char** what);

// InChild (the job's init, pid 1): mount propagation made private, a fresh
// /proc for the pid namespace, the hostname "oarbank". Returns 0 or the
// errno, with the call that failed in `what`. No allocation.
int SetUpInitInChild(const char** what);

// A real attempt, in a throw-away child, to create every namespace a job
// needs and mount its /proc: what the sysctls say is not always what the
// kernel (or an LSM) does. Cached per process.
struct NamespaceProbe {
  bool ok = false;
  std::string detail;  // "available" or the call and errno that refused it
};
const NamespaceProbe& ProbeJobNamespaces();

}  // namespace oarbank
