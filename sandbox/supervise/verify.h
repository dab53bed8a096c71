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
// read-only (carve_out.h), and /etc mounted idmapped for a root job
// (root_etc.h).
// Kernel limit: Landlock leaves no trace in /proc, so the Landlock step is
// not verified here (the launcher fails closed on it, and the battery
// proves it).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oarbank/cage.h"  // GateReading

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

// Reads /proc/<pid>/{status,cgroup,ns/*,mountinfo} and checks them: the
// reading, the cgroup line (when `cgroup_line` is not empty:
// "0::/path/of/leaf"), that every namespace in `fresh` ("user", "pid",
// "net", ...) differs from the supervisor's own, the read-only /, the noexec
// mounts, and for
// a root job the idmapped /etc (root_etc.h), and with `job_devices` the
// job's own /dev/pts and /dev/shm on top (job_devices.h): writable where
// every host mount is read-only, /dev/shm noexec.
GateCheck VerifyConfined(pid_t pid, pid_t parent, const std::string& cgroup_line, const std::vector<std::string>& fresh,
                         const std::vector<std::string>& noexec, bool root_etc_idmapped,
                         const std::vector<std::string>& read_only = {}, bool job_devices = false);

}  // namespace oarbank
