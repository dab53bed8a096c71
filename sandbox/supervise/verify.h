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
// job must have an inode other than the supervisor's, and what the job's
// mount namespace holds, each path opened through /proc/<pid>/root with no
// link followed and its mount's flags read with fstatfs(2) (the mount the
// path reaches, which is what the job's accesses meet; mountinfo only where
// a path's filesystem is read-only on the host too, since statfs cannot
// tell a read-only mount from a read-only filesystem): / read-only
// (filesystem.metadata), each writable grant noexec when exec_writable is
// false, each read_only carve-out read-only (carve_out.h), each writable
// grant and carve-out the inode the policy's walk found (the launcher
// checks it too, from inside; this reads it back from outside), and a root
// job's /etc the idmapped view (root_etc.h: the host's /etc, its root owner
// shown as 65534).
// Kernel limit: Landlock leaves no trace in /proc, so the Landlock step is
// not verified here (the launcher fails closed on it, and the battery
// proves it).
#pragma once

#include <sys/stat.h>
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

// Pure: the first of `paths` that /proc/<pid>/mountinfo text does not show
// mounted with `option` ("noexec", "idmapped"; the last mount on a path
// wins), or nullopt. The gate reads mountinfo only for what fstatfs(2)
// cannot say: whether /etc is idmapped on a host whose /etc is not root's.
std::optional<std::string> CheckMountOption(std::string_view mountinfo, const std::vector<std::string>& paths,
                                            std::string_view option);

// A path whose mount lacks what the gate wants: `err` is why it could not
// be read (ELOOP for a link on the way), with what could not be read; or 0
// when it was and its mount's flags are wrong.
struct MountMiss {
  std::string path;
  int err = 0;
  const char* unread = "it cannot be opened in the job's view without following a link";
  std::string Detail() const;  // "" or " (<unread>: <error>)"
};

// Pure but for its reads below `root` (the job's root, /proc/<pid>/root):
// the first of `paths` (absolute, in the job's view) that, opened from
// `root` with no link followed, is on a mount whose fstatfs(2) flags have
// `flag` (ST_RDONLY, ST_NOEXEC) set when `set` is false or unset when it is
// true; or nullopt.
std::optional<MountMiss> FirstMountWithout(int root, const std::vector<std::string>& paths, unsigned long flag,
                                           bool set);

// Pure but for its reads below `root` (the job's root, /proc/<pid>/root):
// the first of `inodes` (a path, and the inode the policy's walk found
// there: common/grant_path.h) that, opened from `root` with no link
// followed, is missing or another inode, said in one line; or nullopt.
std::optional<std::string> CheckMountedInodes(int root, const std::map<std::string, FileId>& inodes);

// A mount the job reaches read-only may be so by its own flag or by its
// filesystem's: statfs(2) says ST_RDONLY for both, and a filesystem mounted
// read-only can be made writable again by the host under a running job,
// where a read-only mount stays so. The first of `paths` (in the job's view,
// opened from `root` with no link followed) that is not read-only there, or
// whose filesystem is read-only on the host too (the same path in this
// process's view) while /proc/<pid>/mountinfo shows the job's mount without
// its own "ro"; or nullopt.
std::optional<MountMiss> FirstNotMountedReadOnly(int root, const std::string& pid,
                                                 const std::vector<std::string>& paths);

// Pure but for its reads below `root` (the job's root): whether the job's
// /etc is the idmapped view of the host's root-owned /etc (`host`, its
// stat): the same directory, its owner shown as kRootEtcOwner (root_etc.h).
// An /etc bound plainly, or idmapped another way, shows its owner as it
// is. The reason it is not, in one line, or nullopt.
std::optional<std::string> CheckRootEtcView(int root, const struct stat& host);

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

// Reads /proc/<pid>/{status,cgroup,ns/*,root} and checks them
// against `want`: the reading, the cgroup line, the fresh namespaces, the
// read-only /, the noexec and read-only mounts, the inode under each grant
// and carve-out as the job sees it, the idmapped /etc, the job's devices.
GateCheck VerifyConfined(pid_t pid, pid_t parent, const GateExpectations& want);

}  // namespace oarbank
