// The job's cgroup v2 leaf, where the agent's cgroup is delegated: a
// writable cgroup2 directory (systemd Delegate=yes, or root's own cgroup).
// The leaf gives the process container a kernel-side kill switch
// (cgroup.kill, Linux 5.14, kills every process in it at once, however it
// forked), cgroup.freeze, and, when the node turns reservations into hard
// limits, memory.max (with memory.oom.group, so an OOM kills the whole job
// and is reported as the fault `oom`) and cpu.max.
//
// Kernel limits: a controller can be given to leaves only through the
// parent's cgroup.subtree_control, and only while the parent itself holds
// no process ("no internal processes"): when the agent sits in its own
// delegated cgroup, the supervisor moves the agent into a sibling leaf
// `oarbank-supervisor` first (what systemd documents for delegation).
// Without a delegated cgroup the pid namespace alone is the container, and
// memory and cpu limits are unavailable (the capability table says so).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

struct CgroupDelegation {
  bool usable = false;  // a leaf can be made below `base`
  std::string base;     // the agent's delegated cgroup (absolute path)
  std::string detail;   // what is there, or why not
  bool memory = false;  // controllers `base` can give its leaves
  bool cpu = false;
  bool pids = false;
};

// Pure: where the job's leaf goes, from the probed facts.
CgroupDelegation DetectCgroupDelegation(const CgroupFacts& facts);

struct LeafLimits {
  std::optional<uint64_t> memory_max;  // bytes
  std::optional<uint64_t> cpu_quota;   // microseconds per cpu_period
  uint64_t cpu_period = 100000;
  // limits.pids, written as pids.max where the pids controller is delegated
  // and reported `unavailable` elsewhere; with hard limits, a policy that
  // names limits.pids needs the controller (pids_required).
  uint64_t pids_max = kDefaultPidsMax;
  bool pids_available = false;
  bool pids_required = false;
  bool needs_memory() const { return memory_max.has_value(); }
  bool needs_cpu() const { return cpu_quota.has_value(); }
};

// Pure: the policy's limits as cgroup values, when the node asks for hard
// limits (otherwise they are reservations and nothing is written). pids.max
// is always written where `pids_controller` (the delegation offers it).
LeafLimits PlanLeafLimits(const Limits& limits, bool hard_limits, bool pids_controller = false);

// "memory.max=2147483648 cpu.max=150000 100000 pids.max=4096" for the
// report; "pids.max unavailable" without the pids controller.
std::string DescribeLeafLimits(const LeafLimits& limits);

class CgroupLeaf {
 public:
  // Makes the leaf below the delegation and writes the limits. Fails (with
  // the file that refused) rather than run with less than asked.
  static Expected<CgroupLeaf> Create(const CgroupDelegation& delegation, const LeafLimits& limits);
  // Create in two halves: Prepare checks the delegation, gives the leaves
  // their controllers and names the leaf, making nothing; Make (in the
  // keeper, once its parent-death signal is armed, so no leaf is ever made
  // that no living process will remove) makes the directory and writes the
  // limits, removing it again if a write fails.
  static Expected<CgroupLeaf> Prepare(const CgroupDelegation& delegation, const LeafLimits& limits);
  // 0, or an errno with `*file` the file that refused ("" for the mkdir) and
  // `*field` the policy field ("process.container", "limits.memory", ...).
  // No allocation.
  int Make(const char** field, const char** file) const;
  // After Make (in this process or another): which control files there are,
  // for the report. Kill asks the leaf again when they were not read.
  void ReadFeatures();

  const std::string& path() const { return path_; }
  bool has_kill() const { return has_kill_; }
  bool has_freeze() const { return has_freeze_; }

  // Each returns 0 or an errno. No allocation: safe in the keeper process.
  int MoveProcess(pid_t pid) const;  // cgroup.procs
  int Kill() const;                  // cgroup.kill (or SIGKILL to each process before 5.14)
  int Freeze(bool frozen) const;     // cgroup.freeze, then waits for cgroup.events to agree
  bool Populated() const;            // cgroup.events "populated 1"
  long OomKills() const;             // memory.events "oom_kill", -1 without the memory controller
  // Kills what is left, waits (bounded) until empty, removes the directory.
  int Remove() const;

 private:
  std::string path_;
  std::string memory_max_;  // the values Make writes, "" for none
  std::string cpu_max_;
  std::string pids_max_;
  bool has_kill_ = false;
  bool has_freeze_ = false;
  bool HasFile(const char* name) const;
};

// Removes leaves left by supervisors that died together with their keeper
// (oarbank-job-<pid>-*, <pid> gone, nothing inside). Returns how many.
int CollectStaleLeaves(const std::string& base);

// The relative path /proc/<pid>/cgroup shows for `absolute` ("0::/x/y").
std::string CgroupProcLine(const CgroupFacts& facts, const std::string& absolute);

}  // namespace oarbank
