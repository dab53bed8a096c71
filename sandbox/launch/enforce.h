// Carrying out a Plan in the process that will become the module. The
// launch is one ordered list of named steps; each either succeeds in full or
// the launch stops with a StepFailure naming the step (exit 70):
//
//   close-fds        every inherited fd but stdio (and the broker
//                    connection, when the plan hands one over) is made
//                    close-on-exec
//   no-new-privs     PR_SET_NO_NEW_PRIVS: exec can never add privileges
//   no-core-dumps    RLIMIT_CORE 0, soft and hard (raising it needs
//                    CAP_SYS_RESOURCE, dropped below): a crash writes no
//                    core file into a writable grant
//   mount-namespace  (exec_writable=false) private user+mount namespace,
//                    writable grants re-bound noexec,nosuid,nodev (in the
//                    supervisor's job, whose namespaces are already its
//                    own, only the binds); then the read_only carve-outs
//                    bound read-only inside them (carve_out.h), and the
//                    job's own devpts and /dev/shm (job_devices.h). Its
//                    stages: mount_namespace.h
//   terminal         (a job with a pty) a pty of the job's devpts becomes
//                    stdio and controlling terminal; the master goes to
//                    the supervisor
//   drop-capabilities  bounding, ambient, inheritable, permitted, effective
//   landlock         the ruleset for the host's ABI, then restrict_self
//   seccomp          the deny-list; foreign and x32 syscall ABIs kill
//   gate             (with a gate fd) report ready, then wait until the
//                    supervisor has read /proc/<pid>/status and says go:
//                    no module instruction runs before that check
//   exec             (exit 71 if it fails)
//
// Landlock and seccomp cannot be undone, so tests run these steps in a
// forked child.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "sandbox/plan/plan.h"

namespace oarbank {

enum class LaunchStep {
  kPlacement,
  kCloseFds,
  kNoNewPrivs,
  kCoreDumps,
  kMountNamespace,
  kTerminal,
  kDropCapabilities,
  kLandlock,
  kSeccomp,
  kGate,
  kExec,
};
const char* StepName(LaunchStep step);

// Fixed size, no allocation: a forked child can send it over a pipe.
struct StepFailure {
  LaunchStep step = LaunchStep::kPlacement;
  int err = 0;  // errno, 0 when not a syscall failure
  char detail[200] = {};
};

// "sandbox: landlock: /srv/bundle: Permission denied"
std::string StepFailureLine(const StepFailure& failure);

// A StepFailure of `step` with errno `err` (0: none) and a printf-style
// detail. Allocation-free: the launcher builds them after the fork.
std::optional<StepFailure> StepFailed(LaunchStep step, int err, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// The gate protocol, on a connected unix socket (SOCK_STREAM or
// SOCK_SEQPACKET): once every other step is in place the launcher sends
// kGateReady (a supervisor that set SO_PASSCRED learns the launcher's pid in
// its own pid namespace from it) and blocks until it reads kGateGo. Anything
// else, or EOF, and the launch stops (exit 70). The fd is close-on-exec, so
// the supervisor reads EOF exactly when the exec succeeded.
inline constexpr char kGateReady = 'R';
inline constexpr char kGateGo = 'G';

struct LaunchOptions {
  int gate_fd = -1;  // >= 0: end at the gate on this socket
  // The caller is already alone in a user and mount namespace of its own
  // (a job of the supervisor, namespaces.h): the mount-namespace step binds
  // the writable grants noexec there rather than unsharing another pair.
  bool own_mount_namespace = false;
  // Root's idmapped /etc (root_etc.h), for a plan with root_etc_view: a
  // tree from MakeRootEtcTree, made where the caller still could (the
  // supervisor's keeper, before the job's user namespace), which a root
  // launch mounts over /etc; or, with no tree (-1), the view's namespace
  // (RootEtcView::idmap) through which the mount-namespace step makes one
  // itself (it must be root in the initial user namespace then). A plan
  // that asks for the view with neither fails closed.
  int root_etc_tree_fd = -1;
  int root_etc_idmap_fd = -1;
  // >= 0: the inherited broker connection (plan.h BrokerHandoff), the one fd
  // besides stdio that close-fds leaves open across exec.
  int broker_fd = -1;
  // A job with a pty (RunOptions::pty): after the mount-namespace step,
  // open the job's terminal and send its master on gate_fd (job_devices.h).
  bool terminal = false;
};

// Applies every step but exec to the calling (single-threaded) process,
// ending at the gate when options.gate_fd >= 0. Refuses a plan whose
// placement is not ok. Irreversible.
[[nodiscard]] std::optional<StepFailure> ConfineSelf(const Plan& plan, const LaunchOptions& options = {});

// The seccomp step alone: loads the filter of `rules` for this
// architecture (default allow, foreign and x32 ABIs kill the process, ENOSYS
// above syscall number `highest`: seccomp/filter.h). Needs no_new_privs or
// CAP_SYS_ADMIN. Exposed so the benchmark times exactly the filter the
// launcher loads.
std::optional<StepFailure> ApplySeccomp(const std::vector<SeccompRule>& rules,
                                        int highest = HighestSyscall(NativeSeccompArch()));

// Execs argv (PATH search like execvp). Returns only on failure, with errno set.
void ExecModule(char* const argv[]);

// Shared by the steps (enforce.cc, mount_namespace.cc): a canonical path
// opened O_PATH | O_CLOEXEC with no symlink in any component (ELOOP if one
// is there now): what the policy named when it was read, or nothing. An fd,
// or -1 with errno. Allocates nothing.
int OpenNoSymlinks(const std::string& path);
inline constexpr char kSwappedForSymlink[] = "a symlink is in it now, since the policy was read";

// Whether `fd` is the inode `expected` (always, where none is known): the
// second walk of a grant path, inside the job's mount namespace, tied to the
// agent's first (common/grant_path.h). Allocates nothing.
bool IsInode(int fd, FileId expected);
// The same, for an fd the caller has already read with fstat into `st`.
bool IsInode(const struct stat& st, FileId expected);
inline constexpr char kNotTheInode[] = "leads to another directory or file than when the policy was read";

}  // namespace oarbank
