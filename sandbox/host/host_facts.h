// What this kernel and this process can do, probed once. A plain struct so
// tests inject any host (every Landlock ABI from none to the newest) and the
// planner and the report never touch the system themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/host/root_etc.h"

namespace oarbank {

struct CgroupFacts {
  bool probed = false;                   // false: not read (ProbeScope), every limit is unavailable
  bool v2_mounted = false;               // a cgroup2 hierarchy is mounted
  std::string mount_point;               // where
  std::string own_path;                  // this process's cgroup, absolute on the host
  bool writable = false;                 // we may create a leaf below own_path
  std::vector<std::string> controllers;  // cgroup.controllers of own_path
  bool has_kill = false;                 // cgroup.kill exists (5.14+)
  // Why what decides the above could not be read ("<path>: absent",
  // unreadable, or a line it cannot parse): every limit is then
  // unavailable naming it, and no cgroup contains a job. "" otherwise.
  std::string error;
};

// Fills `c` from a mountinfo file, a /proc/<pid>/cgroup file and the
// cgroup.controllers of the cgroup they name. Fails closed: one that is
// absent, unreadable or malformed sets `error` and leaves every fact false.
void ReadCgroupFacts(CgroupFacts& c, const std::string& mountinfo_path, const std::string& self_cgroup_path);

// The same, for a cgroup2 hierarchy known to be mounted at `mount_point`
// (ProbeCgroup asks the usual places with statfs before it reads mountinfo).
void ReadCgroupFactsAt(CgroupFacts& c, const std::string& mount_point, const std::string& self_cgroup_path);

struct HostFacts {
  std::string kernel_release;
  std::string arch;

  // Landlock: 0 when the kernel has none (ENOSYS) or it is disabled
  // (EOPNOTSUPP). `landlock_abi` is what the launcher will use; when a test
  // caps it below what the kernel offers, `landlock_kernel_abi` keeps the
  // kernel's value and `landlock_capped` is set. A cap can only lower it.
  int landlock_abi = 0;
  int landlock_kernel_abi = 0;
  bool landlock_capped = false;
  uint32_t landlock_errata = 0;        // bit N-1: erratum N is fixed here
  bool landlock_errata_known = false;  // the kernel answers the query (6.15, backports)
  // Each feature the plan relies on (refer, truncate, TCP and UDP rules,
  // ioctl_dev, the scopes, resolve_unix) is tried, not read off the ABI
  // number: a kernel can report an ABI without one of its features (a
  // backport reporting ABI 6 without signal scoping). The first one missing
  // at or below the ABI lowers `landlock_abi` to the ABI before it, so a
  // policy that needs it is refused; this names it ("" when none is).
  std::string landlock_missing;
  // Which right a whiteout needs on this kernel (Landlock erratum 4), made
  // by rename and by mknod, tried in children when ProbeScope asks
  // (whiteout_trial.h): "rename make_reg, mknod make_char" without the fix.
  std::string landlock_whiteout_needs;

  bool seccomp_filter = false;  // SECCOMP_SET_MODE_FILTER is built in
  std::vector<std::string> seccomp_actions;

  // Unprivileged user namespaces (and so a private mount namespace for the
  // noexec binds). Read from sysctls here; the launch step that needs one
  // fails closed (exit 70) if the kernel still refuses.
  bool user_namespaces = false;
  std::string user_namespaces_detail;

  CgroupFacts cgroup;

  // An egress-any job's network (job_network.h): only a supervisor (`run`,
  // cage::Run) gives a job one, so `supervised` is set by the supervisor
  // and its report alone; `sandbox-exec` leaves it false and egress-any
  // unavailable. `ok`/`missing`/`detail` are ProbeJobNetwork's.
  struct JobNetworkFacts {
    bool supervised = false;
    bool ok = false;
    std::string missing;
    std::string detail;
    // The user-mode stack and the nftables helper egress-any would run
    // (set for a policy, or a report, that asks about egress-any): the
    // battery attestation binds their digests for the egress-any classes.
    std::string stack_path, helper_path;
  } job_network;

  // Existing GPU device nodes (devices.gpu = "compute").
  std::vector<std::string> gpu_nodes;

  // Only when this process runs as root, whom file permissions do not stop
  // from reading /etc/shadow or SSH host keys (root_etc.h). `etc_view` is
  // an idmapped /etc in which root owns nothing; the launch mounts it over
  // /etc. Where the kernel or the filesystem cannot idmap (`etc_view.detail`
  // says why), `etc_world_readable` lists the world-readable parts of /etc
  // (files, and directories whose whole subtree is world-readable) and the
  // base system's /etc grant is narrowed to them.
  bool runs_as_root = false;
  uint32_t uid = 0, gid = 0;  // this process's effective ids (a job's user namespace maps them)
  RootEtcView etc_view;
  std::vector<std::string> etc_world_readable;
};

// Which facts a probe reads. Everything by default (the report, the
// battery). The launcher's plan reads no cgroup fact and GPU nodes only for
// devices.gpu, so it skips the rest (LaunchProbeScope): about a tenth of a
// launch here; the supervisor's reads GPU nodes only for devices.gpu too
// (SupervisedProbeScope). A fact not read stays at its "unavailable"
// default, so a plan that did come to need it would refuse, never run wider.
struct ProbeScope {
  bool cgroup = true;
  bool gpu_nodes = true;
  // The whiteout trial forks a child: only reports (sandbox-report, the
  // battery) ask for it.
  bool landlock_whiteout = false;
};

// Reads the facts of the running kernel for this process. `abi_cap` >= 0
// lowers the Landlock ABI used (test-only use: it can never raise it).
HostFacts ProbeHost(int abi_cap = -1, ProbeScope scope = {});

// For a launch (or a report of one) by root: fills `etc_view`, or, where
// the host cannot idmap, `etc_world_readable`. Not part of ProbeHost, which
// callers that launch nothing use too: it forks a child and opens a
// namespace (once per process; later calls reuse it). Nothing for a process
// that is not root.
void ProbeRootEtc(HostFacts& f);

}  // namespace oarbank
