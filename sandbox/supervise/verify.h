// The supervisor's verification at the gate: before the launcher may exec,
// the supervisor reads, from outside, what the kernel says about it in
// /proc/<pid>/status and refuses anything that is not fully confined:
//
//   NoNewPrivs: 1           exec can never add privileges
//   Seccomp: 2              a filter is loaded (mode 2)...
//   Seccomp_filters >= 1    ...at least one (Linux 5.9)
//   CapEff, CapPrm, CapInh, CapAmb all zero
//                           (CapEff alone is not enough: a permitted
//                           capability can be raised again with capset)
//   PPid                    the job's init, so the pid names the launcher
//                           and not a process that reused its number
//
// plus RLIMIT_CORE 0, soft and hard (prlimit(2) on the pid), the job's
// cgroup leaf (/proc/<pid>/cgroup), for each namespace the
// job must have an inode other than the supervisor's, / mounted read-only
// (/proc/<pid>/mountinfo: filesystem.metadata), each writable grant mounted
// noexec when exec_writable is false, each read_only carve-out mounted
// read-only (carve_out.h), each writable grant and carve-out, opened from
// the job's root with no link followed, the inode the policy's walk found
// (the launcher checks it too, from inside; this reads it back from
// outside), and /etc mounted idmapped for a root job (root_etc.h).
// Kernel limit: Landlock leaves no trace in /proc, so the Landlock step is
// not verified here (the launcher fails closed on it, and the battery
// proves it).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oarbank/cage.h"               // GateReading
#include "sandbox/common/grant_path.h"  // FileId

namespace oarbank {

// Pure: the fields the gate reads, from the text of /proc/<pid>/status.
GateReading ParseProcStatus(std::string_view status_text);

// Pure: the first reason `reading` is not a confined launcher whose parent
// is `parent`, or nullopt.
std::optional<std::string> CheckGateReading(const GateReading& reading, pid_t parent);

struct GateCheck {
  bool ok = false;
  std::string reason;  // the first thing that failed
  GateReading reading;
};

// Pure: the first path of `noexec` that /proc/<pid>/mountinfo text does not
// show mounted noexec (the last mount on a path wins), or nullopt.
std::optional<std::string> CheckNoexecMounts(std::string_view mountinfo, const std::vector<std::string>& noexec);

// Pure: the first of `paths` that mountinfo does not show mounted with
// `option` ("noexec", "idmapped"; the last mount on a path wins), or nullopt.
std::optional<std::string> CheckMountOption(std::string_view mountinfo, const std::vector<std::string>& paths,
                                            std::string_view option);

// Pure but for its reads below `root` (the job's root, /proc/<pid>/root):
// the first of `inodes` (a path, and the inode the policy's walk found
// there: common/grant_path.h) that, opened from `root` with no link
// followed, is missing or another inode, said in one line; or nullopt.
std::optional<std::string> CheckMountedInodes(int root, const std::map<std::string, FileId>& inodes);

// The supervisor's own namespace links ("user" -> "user:[4026531837]", for
// user, pid, ipc, uts, mnt, net, cgroup and time), read once per process:
// they never change, and a job's must differ from them. Reading them before
// a job reaches its gate keeps them off the launch's path.
const std::map<std::string, std::string>& OwnNamespaces();

// What the gate expects of a launcher, from the plan.
struct GateExpectations {
  std::string cgroup_line;               // "0::/path/of/leaf", or "" when the job has no leaf
  std::vector<std::string> fresh;        // namespaces that must differ from the supervisor's ("user", "pid", ...)
  std::vector<std::string> noexec;       // writable grants that must be mounted noexec
  std::vector<std::string> read_only;    // carve-outs that must be mounted read-only
  std::map<std::string, FileId> inodes;  // writable grants and carve-outs: the inode each must be
  bool root_etc_idmapped = false;        // a root job's /etc must be the idmapped view (root_etc.h)
  // The job's own /dev/pts and /dev/shm on top (job_devices.h): writable
  // where every host mount is read-only, /dev/shm noexec.
  bool job_devices = false;
};

// Reads /proc/<pid>/{status,cgroup,ns/*,mountinfo,root} and checks them
// against `want`: the reading, the cgroup line, the fresh namespaces, the
// read-only /, the noexec and read-only mounts, the inode under each grant
// and carve-out as the job sees it, the idmapped /etc, the job's devices.
GateCheck VerifyConfined(pid_t pid, pid_t parent, const GateExpectations& want);

}  // namespace oarbank
