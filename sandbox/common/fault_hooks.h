// Test-only fault hooks. All are unset in oarbank-agent and in every
// program that links the library; only oarbank-agent-faulty's main sets them
// (sandbox/cli/fault_injection.cc, which is compiled into that binary alone,
// so the production binary holds neither the hooks' code nor the names of
// the variables that drive them). Nothing in the library is compiled twice.
//
// - pause: at a named point the process may wait, so a test can kill the
//   agent inside a window, or change the world there, at a known moment.
//   Called in the keeper, init and the launcher after a fork: the hook must
//   be allocation-free and lock-free.
// - skip_step: the launcher leaves the named step out (launch/enforce.h's
//   StepName, "read-only-carve-outs" (launch/carve_out.h) or "job-devices"
//   (launch/job_devices.h)), so a test can show that the supervisor's verification at the
//   gate refuses the unconfined process before it execs; and the supervisor
//   builds an egress-any job's ruleset without its address classes
//   ("job-ruleset-classes", supervise/job_network.h) or without the host's
//   own addresses ("job-ruleset-host-addresses"), so the battery can show it
//   sees a non-public destination, or the host, reached; and grant paths are
//   resolved following every symbolic link, as realpath(3) would
//   ("grant-links": grant_path.h, open_no_symlinks.h and the policy's check
//   of the links it followed), so the battery's crossrun_* probes can show
//   what a job plants for the next run reached; and a worktree's .git
//   pointer, commondir included, is granted as named, unproven
//   ("git-back-pointers", launch/git_history.h); and the launcher binds a
//   grant without comparing its inode with the plan's ("grant-inodes",
//   launch/enforce.h's IsInode), so a test can show the gate's read-back
//   from outside catches a grant swapped before the launcher opened it;
//   and the seccomp filter's ENOSYS above the syscall table is left out
//   ("seccomp-above-table", seccomp/filter.h).
//   The mutation analysis (oarbank-conform mutants) also skips: one of the
//   job's namespaces ("namespace-pid", "namespace-ipc", "namespace-uts",
//   "namespace-net": supervise/supervisor.cc), the job's own /proc
//   ("job-proc": supervise/namespaces.cc), one check of the gate
//   ("gate-status", "gate-core-limit", "gate-cgroup", "gate-fresh-namespaces",
//   "gate-read-only-root", "gate-noexec", "gate-read-only-carve-outs",
//   "gate-inodes", "gate-root-etc", "gate-job-devices": supervise/verify.cc),
//   and the module environment's filter ("environment-filter": the
//   caller's variables pass, supervise/environment.cc).
// - mutate_plan: breaks rules of a launcher's plan on purpose, after it is
//   made and before it is carried out, under sandbox-exec and under the
//   supervisor alike (cli/fault_injection.h).
// - syscall_table_end: >= 0 makes the syscall table end at that number
//   (seccomp/syscall_table.h), as in a build made before the later
//   syscalls existed: their rows go, and ENOSYS starts above it.
// - landlock_missing: a Landlock feature (host_facts.h's names:
//   "scope_signal", "resolve_unix", ...) that the host probe takes as
//   missing, as on a kernel that reports an ABI without all of it.
#pragma once

namespace oarbank {

struct Plan;

struct FaultHooks {
  void (*pause)(const char* point, long a, long b) = nullptr;
  bool (*skip_step)(const char* step) = nullptr;
  void (*mutate_plan)(Plan& plan) = nullptr;
  int syscall_table_end = -1;
  const char* landlock_missing = nullptr;
};

extern FaultHooks fault_hooks;

inline void FaultPause(const char* point, long a = 0, long b = 0) {
  if (fault_hooks.pause != nullptr) fault_hooks.pause(point, a, b);
}

inline bool FaultSkipStep(const char* step) { return fault_hooks.skip_step != nullptr && fault_hooks.skip_step(step); }

inline void FaultMutatePlan(Plan& plan) {
  if (fault_hooks.mutate_plan != nullptr) fault_hooks.mutate_plan(plan);
}

}  // namespace oarbank
