// PlanConfinement decides, without a single syscall, everything the launcher
// will apply for a policy on a host: the Landlock ruleset for the host's
// ABI, the private mount namespace with noexec binds, the seccomp rows, the
// fds to keep, and the placement verdict. The enforce step (enforce.h) only
// carries the plan out; it holds no policy logic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sandbox/host/host_facts.h"
#include "sandbox/host/landlock_abi.h"
#include "sandbox/plan/capabilities.h"
#include "sandbox/policy/policy.h"
#include "sandbox/seccomp/rules.h"
#include "sandbox/seccomp/syscall_table.h"

namespace oarbank {

// A supervised job's own devpts instance and /dev/shm tmpfs
// (sandbox/launch/job_devices.h mounts them).
struct JobDevices {
  bool enabled = false;
  uint64_t shm_bytes = 0;   // tmpfs size= of /dev/shm
  uint32_t shm_inodes = 0;  // tmpfs nr_inodes= of /dev/shm
};

inline constexpr uint64_t kDefaultShmBytes = uint64_t{64} << 20;
inline constexpr uint32_t kShmInodes = 16384;

struct PathRule {
  std::string path;
  uint64_t access = 0;    // Landlock fs rights; masked to file rights at apply time for a file
  bool optional = false;  // base-system paths absent on this host are skipped; a policy path is never optional
  std::string source;     // the policy field or "base system"
  // A policy path, canonical when the policy was read: opened with no symlink
  // allowed in any component, so one swapped in since (by a process sharing
  // the grant) refuses the launch instead of moving the rule.
  bool canonical = false;
  FileId inode{};  // a policy path's inode when it was read: another there now refuses the launch
};

struct PortRule {
  uint16_t port = 0;
  uint64_t access = 0;
  std::string source;
};

struct LandlockPlan {
  LandlockAbi abi = LandlockAbi::kNone;
  uint64_t handled_fs = 0;
  uint64_t handled_net = 0;
  uint64_t scoped = 0;
  std::vector<PathRule> paths;
  std::vector<PortRule> ports;
};

// A grant the plan does not enforce, with the capability that would.
struct Gap {
  std::string field;
  CapabilityId capability;
  std::string detail;
};

// How a granted broker reaches the module (sandbox/broker/server.h). Below Landlock ABI 9
// nothing can limit pathname connects to one socket, so socket(AF_UNIX)
// stays refused and the launcher hands the module one already-connected
// socket (OARBANK_BROKER=fd:N), the only unix socket it holds. From ABI 9
// the module connects by path (OARBANK_BROKER=unix:/path) and Landlock's
// RESOLVE_UNIX lets it reach that socket alone.
enum class BrokerHandoff { kNone, kInheritedFd, kPath };
const char* BrokerHandoffName(BrokerHandoff handoff);  // "none", "inherited-fd", "path"

// ipc "job" from Landlock ABI 9: the job's own unix sockets. socket(AF_UNIX)
// and datagram pairs are let through, and RESOLVE_UNIX (connect and sendto
// to a pathname socket) is handled with no path granted it: Landlock lets a
// domain reach the sockets its own processes bound, wherever they are, and
// refuses every other (EACCES). So the job's servers (tmux, Python's
// Manager, a test's) work in any directory it may write, and no socket it
// did not make answers it: not a host daemon's in a worktree's .git (git's
// fsmonitor), in its scratch or its data, nor another job's in a data
// directory two jobs share. Abstract names are the job's network
// namespace's and scoped to its Landlock domain. Below ABI 9 nothing but
// the broker could confine a connect by path, and socket(AF_UNIX) stays
// refused.
bool JobUnixSockets(const Policy& policy, LandlockAbi abi);

// A row of the table the host's architecture has no syscall for
// (seccomp/syscall_table.h): never in its filter, and said with the reason.
struct DroppedSeccompRow {
  SeccompRule rule;
  std::string reason;
};

struct Plan {
  Placement placement;
  BrokerHandoff broker = BrokerHandoff::kNone;
  LandlockPlan landlock;
  // A private user+mount namespace, on every launch. Every mount in it is
  // read-only: Landlock has no hook on chmod, chown, utimensat or setxattr,
  // and a read-only mount refuses them (EROFS) outside the writable grants.
  // Each writable grant is bound onto itself read-write, nosuid, nodev, and
  // noexec when exec_writable is false, so that even the dynamic loader
  // cannot map a written file executable.
  // A launch as root also mounts an idmapped copy of /etc over /etc there
  // (root_etc.h, root_etc_view), when the host can make one.
  bool read_only_mounts = false;            // set by the planner; cleared only by a test build's fault
  std::vector<std::string> writable_binds;  // parents before what lies inside them
  bool writable_noexec = false;
  // The policy's read_only carve-outs (carve_out.h): each bound read-only
  // onto itself once the writable grants are in place, its ancestors inside
  // the grant pinned by binds of their own so none can be renamed away.
  std::vector<std::string> read_only_binds;
  // Each writable grant's and carve-out's inode as the policy was read
  // (common/grant_path.h). The launcher opens each path again in the job's
  // mount namespace with no link allowed and refuses a launch where it now
  // leads to another inode; the gate reads the binds back against it too.
  std::map<std::string, FileId> inodes;
  // Root's /etc is the idmapped view (root_etc.h): the launcher makes it
  // through the namespace its caller hands over (LaunchOptions), since a
  // plan holds decisions, never a descriptor.
  bool root_etc_view = false;
  // A supervised job's own devpts instance and /dev/shm (sandbox/launch/job_devices.h);
  // off for sandbox-exec, which leaves /dev as the host has it.
  JobDevices job_devices;
  // The seccomp filter (seccomp/filter.h) for the host's architecture: the
  // rows, the highest syscall number the table knows (ENOSYS above it), and
  // the rows dropped because the architecture lacks their syscall.
  std::vector<SeccompRule> seccomp;
  SeccompArch seccomp_arch = SeccompArch::kX86_64;
  int seccomp_highest = -1;
  std::vector<DroppedSeccompRow> seccomp_dropped;
  std::vector<Gap> gaps;
};

Plan PlanConfinement(const Policy& policy, const HostFacts& host);

// The host facts PlanConfinement reads for `policy`, so the launcher probes
// no more: never a cgroup fact (no capability it requires is a cgroup one),
// GPU nodes only for devices.gpu = "compute". plan_test holds the plan to it.
ProbeScope LaunchProbeScope(const Policy& policy);

// Rights for each kind of grant at an ABI (exposed for tests and the report).
uint64_t ReadExecuteRights(LandlockAbi abi);
uint64_t ReadWriteRights(LandlockAbi abi, bool exec_writable);

// Turns a supervised job's own devices (JobDevices) on in `plan` and grants
// them in its Landlock ruleset. No syscall.
void PlanJobDevices(Plan& plan, uint64_t shm_bytes);
uint64_t DeviceRights(LandlockAbi abi);
uint64_t GpuRights(LandlockAbi abi);

}  // namespace oarbank
