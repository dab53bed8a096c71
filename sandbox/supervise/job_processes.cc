#include "sandbox/supervise/job_processes.h"

#include "sandbox/host/root_etc.h"
#include "sandbox/launch/carve_out.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/common/text_encoding.h"
#include "sandbox/launch/broker_handoff.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/plan/capabilities.h"
#include "sandbox/plan/plan.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/environment.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/namespaces.h"

namespace oarbank::cage {
namespace {

// The job's user and mount namespaces are init's, and the launcher shares
// them; a job switched to run_as holds no capability there, so its launcher
// unshares its own (and then cannot share init's memory: vfork is out).
bool LauncherUnsharesNamespaces(const ChildPlan& cp) { return cp.run_as_uid.has_value(); }

// A launcher that must not share init's memory: one that unshares a user
// namespace of its own, and one under debug, whose init is not dumpable
// (a flag of the memory) while the launcher must be, for the gate.
bool LauncherIsForked(const ChildPlan& cp) { return LauncherUnsharesNamespaces(cp) || cp.init_not_dumpable; }

}  // namespace

uint64_t IgnoredSignals() {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ~0ull;  // unknown: reset them all
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return ~0ull;
  buf[n] = '\0';
  const char* line = strstr(buf, "\nSigIgn:");
  return line ? strtoull(line + 9, nullptr, 16) : ~0ull;
}

namespace {

void Copy(char* dst, size_t size, const char* src) { snprintf(dst, size, "%s", src); }

void SendRecord(int fd, Record kind, int value, int err, const char* stage, const char* detail) {
  StatusRecord r{};
  r.kind = kind;
  r.value = value;
  r.err = err;
  Copy(r.stage, sizeof r.stage, stage);
  Copy(r.detail, sizeof r.detail, detail);
  (void)!write(fd, &r, sizeof r);
}

// Closes every fd but `keep` (each process of the job starts from a copy
// of the agent's fd table, which may hold other jobs' pipes).
void CloseAllBut(std::initializer_list<int> keep) {
  int sorted[16];
  int n = 0;
  for (int fd : keep)
    if (fd >= 0 && n < 16) sorted[n++] = fd;
  std::sort(sorted, sorted + n);
  unsigned lo = 0;
  for (int i = 0; i < n; ++i) {
    if (static_cast<unsigned>(sorted[i]) > lo) syscall(SYS_close_range, lo, static_cast<unsigned>(sorted[i]) - 1, 0);
    lo = static_cast<unsigned>(sorted[i]) + 1;
  }
  syscall(SYS_close_range, lo, ~0u, 0);
}

// ---- launcher (in the job's pid namespace; becomes the module) ----------

[[noreturn]] void LauncherFail(int gate, const char* stage, int err, const char* detail, int code) {
  GateFailure f;
  Copy(f.stage, sizeof f.stage, stage);
  f.err = err;
  Copy(f.detail, sizeof f.detail, detail);
  (void)!send(gate, &f, sizeof f, MSG_NOSIGNAL);
  _exit(code);
}

[[noreturn]] void LauncherMain(const ChildPlan& cp, const JobFds& f) {
  close(f.status_w);
  // stdio: /dev/null and the two pipes; nothing of the agent's terminal.
  // Everything moves above 2 first, in case the agent ran with stdio closed.
  // Above kJobBrokerFd, which the broker connection (if any) takes last.
  const int gate = fcntl(f.gate_child, F_DUPFD_CLOEXEC, kJobBrokerFd + 1);
  const int in = fcntl(f.stdin_r >= 0 ? f.stdin_r : f.devnull, F_DUPFD_CLOEXEC, kJobBrokerFd + 1);
  const int out = fcntl(f.out_w, F_DUPFD_CLOEXEC, kJobBrokerFd + 1);
  const int err = fcntl(f.err_w, F_DUPFD_CLOEXEC, kJobBrokerFd + 1);
  const int broker = f.broker < 0 ? -1 : fcntl(f.broker, F_DUPFD_CLOEXEC, kJobBrokerFd + 1);
  if (gate < 0) _exit(kExitNotEnforced);
  // debug: init is not dumpable, and a forked launcher inherits that; the
  // gate reads this process's /proc from outside, as the agent's uid.
  if (cp.init_not_dumpable && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
    LauncherFail(gate, "job-setup", errno, "prctl(PR_SET_DUMPABLE, 1)", kExitNotEnforced);
  if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
    LauncherFail(gate, "job-setup", errno, "stdio", kExitNotEnforced);
  for (int fd : {f.gate_child, f.devnull, f.out_w, f.err_w, f.broker, f.stdin_r, in, out, err})
    if (fd > 2) close(fd);
  if (f.broker >= 0 && (broker < 0 || dup3(broker, kJobBrokerFd, O_CLOEXEC) != kJobBrokerFd || close(broker) != 0))
    LauncherFail(gate, "job-setup", errno, "broker connection", kExitNotEnforced);
  // Default signal dispositions and an empty mask, whatever the agent had:
  // an ignored signal survives exec (the keeper's SIGPIPE too).
  const uint64_t ignored = cp.ignored_signals | (1ull << (SIGPIPE - 1));
  for (int sig = 1; sig < NSIG && sig <= 64; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP && (ignored & (1ull << (sig - 1)))) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // A new session: no controlling terminal, its own process group.
  if (setsid() < 0) LauncherFail(gate, "job-setup", errno, "setsid", kExitNotEnforced);
  if (!cp.maps.deny_setgroups && setgroups(0, nullptr) != 0)
    LauncherFail(gate, "job-setup", errno, "setgroups(0)", kExitNotEnforced);
  if (cp.run_as_gid && setresgid(*cp.run_as_gid, *cp.run_as_gid, *cp.run_as_gid) != 0)
    LauncherFail(gate, "job-setup", errno, "setresgid", kExitNotEnforced);
  if (cp.run_as_uid) {
    if (setresuid(*cp.run_as_uid, *cp.run_as_uid, *cp.run_as_uid) != 0)
      LauncherFail(gate, "job-setup", errno, "setresuid", kExitNotEnforced);
    // As an exec would: setresuid cleared it, and the mount-namespace step
    // writes this process's own /proc files.
    if (prctl(PR_SET_DUMPABLE, 1) != 0) LauncherFail(gate, "job-setup", errno, "dumpable", kExitNotEnforced);
  }
  if (chdir(cp.cwd.c_str()) != 0) LauncherFail(gate, "job-setup", errno, cp.cwd.c_str(), kExitNotEnforced);
  if (auto failure = ConfineSelf(*cp.plan, {.gate_fd = gate,
                                            .own_mount_namespace = !LauncherUnsharesNamespaces(cp),
                                            .root_etc_tree_fd = f.root_etc_tree,
                                            .broker_fd = f.broker >= 0 ? kJobBrokerFd : -1,
                                            .terminal = cp.pty}))
    LauncherFail(gate, StepName(failure->step), failure->err, failure->detail, kExitNotEnforced);
  // The built environment, never the agent's (exec's PATH search uses it too).
  environ = const_cast<char**>(cp.envp.data());
  ExecModule(cp.argv.data());
  LauncherFail(gate, StepName(LaunchStep::kExec), errno, cp.argv[0], kExitExecFailed);
}

// ---- init (pid 1 of the job's pid namespace) ---------------------------

[[noreturn]] void InitMain(const ChildPlan& cp, const JobFds& f) {
  signal(SIGTERM, SIG_DFL);  // not the keeper's handler
  signal(SIGCHLD, SIG_DFL);  // waitpid must see the launcher's status
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  close(f.sync_w);
  // The keeper writes the maps and the cgroup first; EOF means it refused or died.
  char go = 0;
  ssize_t n;
  do n = read(f.sync_r, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1) _exit(1);
  close(f.sync_r);
  const char* what = "";
  if (int err = SetUpInitInChild(&what)) {
    SendRecord(f.status_w, Record::kSetupFailed, 0, err, "pid-namespace init", what);
    _exit(1);
  }
  // ipc "job": the job's loopback is up, for its own servers (under
  // egress-allowlist the proxy's listener below brings it up too).
  if (cp.loopback_up) {
    if (int err = BringUpLoopbackInChild(&what)) {
      SendRecord(f.status_w, Record::kSetupFailed, 0, err, "network namespace", what);
      _exit(1);
    }
  }
  // egress-allowlist: the one listener of the job's network namespace goes
  // to the supervisor's proxy; no process of the job keeps it.
  if (f.egress_child >= 0) {
    const int listener = OpenProxyListenerInChild(static_cast<uint16_t>(cp.egress_port), &what);
    if (listener < 0) {
      SendRecord(f.status_w, Record::kSetupFailed, 0, -listener, "network namespace", what);
      _exit(1);
    }
    const int err = SendListenerInChild(f.egress_child, listener);
    close(listener);
    close(f.egress_child);
    if (err != 0) {
      SendRecord(f.status_w, Record::kSetupFailed, 0, err, "network namespace", "send the proxy listener");
      _exit(1);
    }
  }
  // egress-any: the supervisor installs the ruleset and starts the stack on
  // this network namespace; no launcher before it says so.
  if (f.net_child >= 0) {
    char c = 'N';
    ssize_t r;
    do r = write(f.net_child, &c, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1) {
      do r = read(f.net_child, &c, 1);
      while (r < 0 && errno == EINTR);
    }
    if (r != 1 || c != 'G') _exit(1);
    close(f.net_child);
  }
  // The launcher borrows init's memory until it execs (vfork): no copy of the
  // agent's page tables and no copy-on-write fault while it confines itself,
  // about 1 ms here. init only waits, so being suspended until then costs it
  // nothing; the launcher never returns into this frame, leaves init's fds,
  // signal handlers and working directory alone (vfork copies those), and
  // what it allocates stays unreachable in init's heap. A launcher that
  // unshares a user namespace of its own is forked: the kernel refuses that
  // to a process sharing its memory.
  // debug: the job may trace its own processes, never its init, which holds
  // every capability in the job's user namespace (Landlock's ptrace scoping
  // refuses it too: init is outside the job's domain). Set before the
  // launcher exists, so no process of the job ever sees init dumpable; the
  // launcher, forked, makes itself dumpable again (the gate reads its /proc
  // from outside, as the agent's uid), and its exec keeps it so.
  if (cp.init_not_dumpable && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    SendRecord(f.status_w, Record::kSetupFailed, 0, errno, "pid-namespace init", "prctl(PR_SET_DUMPABLE, 0)");
    _exit(1);
  }
  const pid_t launcher = LauncherIsForked(cp) ? fork() : vfork();
  if (launcher == 0) LauncherMain(cp, f);
  if (launcher < 0) {
    SendRecord(f.status_w, Record::kSetupFailed, 0, errno, "pid-namespace init", "fork the launcher");
    _exit(1);
  }
  for (int fd : {f.gate_child, f.out_w, f.err_w, f.devnull, f.root_etc_tree, f.broker, f.stdin_r})
    if (fd >= 0) close(fd);
  // Reap everything; when the module ends, so does the job: exiting here
  // makes the kernel kill whatever is left in the namespace.
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, __WALL);
    if (pid == launcher) {
      SendRecord(f.status_w, Record::kModuleExit, status, 0, "", "");
      _exit(0);
    }
    if (pid < 0 && errno == ECHILD) _exit(0);
  }
}

// ---- keeper (host namespaces, the supervisor's child) ------------------

volatile sig_atomic_t g_keeper_init = 0;

void KeeperAbort(int) {
  const pid_t init = g_keeper_init;
  if (init > 0) kill(init, SIGKILL);
}

}  // namespace

namespace {

// The keeper's stages, in order. Each that fails says so on the status pipe
// and ends the keeper.

// SIGTERM (from the supervisor, or as the parent-death signal) kills init;
// blocked in `term` until init exists. Only the job's descriptors stay.
void ArmKeeper(const ChildPlan& cp, const JobFds& f, sigset_t& term) {
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  struct sigaction sa {};
  sa.sa_handler = KeeperAbort;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a dead supervisor must not stop the clean-up
  signal(SIGCHLD, SIG_DFL);  // an agent that ignores it would make init's status unreadable
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != cp.supervisor) _exit(1);
  setsid();
  CloseAllBut({f.status_w, f.gate_child, f.sync_r, f.sync_w, f.out_w, f.err_w, f.devnull, f.broker, f.egress_child,
               f.net_child, f.stdin_r, f.trace_r, cp.root_etc_idmap_fd, cp.root_etc_tree_fd});
}

// --explain: the supervisor's descendants may trace this process (Yama's
// PR_SET_PTRACER; EINVAL without Yama), and nothing of the job is made
// until the tracer is attached and says so. EOF: it did not attach.
void AwaitTracer(const ChildPlan& cp, const JobFds& f) {
  if (f.trace_r < 0) return;
  prctl(PR_SET_PTRACER, cp.supervisor, 0, 0, 0);
  char go = 0;
  ssize_t n;
  while ((n = read(f.trace_r, &go, 1)) < 0 && errno == EINTR) {
  }
  close(f.trace_r);
  if (n != 1 || go != 'T') _exit(1);
  prctl(PR_SET_PTRACER, 0, 0, 0, 0);  // attached: no one else may
}

// Root's idmapped /etc can only be made here, in the initial user
// namespace; the launcher mounts it in the job's.
void PrepareRootEtcTree(const ChildPlan& cp, const JobFds& f, JobFds& jf) {
  if (!cp.plan->root_etc_view || cp.run_as_uid) return;
  jf.root_etc_tree = cp.root_etc_tree_fd >= 0 ? cp.root_etc_tree_fd : MakeRootEtcTree(cp.root_etc_idmap_fd);
  if (jf.root_etc_tree >= 0) return;
  SendRecord(f.status_w, Record::kSetupFailed, 0, -jf.root_etc_tree, "mount-namespace",
             "idmap a copy of /etc for root");
  _exit(1);
}

// The job's cgroup leaf is made here, not in the supervisor: only once this
// process's parent-death signal is armed (and its parent checked alive) is
// there always a process that removes it, whenever the supervisor dies.
void MakeLeaf(const ChildPlan& cp, const JobFds& f) {
  if (cp.leaf == nullptr) return;
  const char* field = "";
  const char* file = "";
  if (int err = cp.leaf->Make(&field, &file)) {
    char detail[160];
    if (*file == '\0')
      snprintf(detail, sizeof detail, "mkdir %s", cp.leaf->path().c_str());
    else
      snprintf(detail, sizeof detail, "write %s/%s", cp.leaf->path().c_str(), file);
    SendRecord(f.status_w, Record::kSetupFailed, 0, err, field, detail);
    _exit(1);
  }
}

// init, in the job's namespaces and, where the kernel can place it so,
// already in its cgroup leaf (`in_leaf`). The child runs InitMain.
pid_t CloneInit(const ChildPlan& cp, const JobFds& f, JobFds& jf, bool& in_leaf) {
  const int leaf_dir = cp.leaf != nullptr ? open(cp.leaf->path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  const pid_t init = CloneIntoNamespaces(cp.clone_flags, leaf_dir, &in_leaf);
  const int clone_err = errno;
  if (init == 0) {
    if (leaf_dir >= 0) close(leaf_dir);
    InitMain(cp, jf);
  }
  if (leaf_dir >= 0) close(leaf_dir);
  if (jf.root_etc_tree >= 0) close(jf.root_etc_tree);
  if (init < 0) {
    if (cp.leaf != nullptr) cp.leaf->Remove();
    SendRecord(f.status_w, Record::kSetupFailed, 0, clone_err, "namespaces",
               "clone(NEWUSER|NEWPID|NEWIPC|NEWUTS|NEWNS|NEWNET): user namespaces refused here");
    _exit(1);
  }
  return init;
}

// init's id maps written and init in its leaf, then released (or killed,
// with the reason on the status pipe).
void ReleaseInit(const ChildPlan& cp, const JobFds& f, pid_t init, bool in_leaf) {
  const char* what = "";
  if (int err = WriteIdMapsFromParent(init, cp.maps, &what)) {
    char detail[160];
    snprintf(detail, sizeof detail, "write /proc/%d/%s", static_cast<int>(init), what);
    SendRecord(f.status_w, Record::kSetupFailed, 0, err, "user namespace", detail);
    kill(init, SIGKILL);
  } else if (int err = cp.leaf != nullptr && !in_leaf ? cp.leaf->MoveProcess(init) : 0) {
    SendRecord(f.status_w, Record::kSetupFailed, 0, err, "cgroup", "move the job's init into its leaf");
    kill(init, SIGKILL);
  } else {
    (void)!write(f.sync_w, "G", 1);
  }
  close(f.sync_w);
}

// Waits for init; with it goes every process of its pid namespace. Then
// the leaf is read (OOM kills) and removed, and the supervisor told.
[[noreturn]] void CloseContainer(const ChildPlan& cp, const JobFds& f, pid_t init) {
  int status = 0;
  while (waitpid(init, &status, __WALL) < 0 && errno == EINTR) {
  }
  long oom_kills = -1;
  int cleanup = 0;
  if (cp.leaf != nullptr) {
    oom_kills = cp.leaf->OomKills();
    cleanup = cp.leaf->Remove();
  }
  SendRecord(f.status_w, Record::kClosed, static_cast<int>(oom_kills), cleanup, "cgroup", "");
  _exit(0);
}

}  // namespace

[[noreturn]] void KeeperMain(const ChildPlan& cp, const JobFds& f) {
  sigset_t term;
  ArmKeeper(cp, f, term);
  // The job's /proc files must belong to its uid for the maps to be
  // written: an agent that changed uid without exec is not dumpable, and
  // init would inherit that. Dumpable until init exists (the /etc idmap
  // holder needs it too), then as it was: the keeper itself is not.
  const int dumpable = prctl(PR_GET_DUMPABLE);
  if (dumpable != 1) prctl(PR_SET_DUMPABLE, 1);
  AwaitTracer(cp, f);
  JobFds jf = f;
  PrepareRootEtcTree(cp, f, jf);
  MakeLeaf(cp, f);
  bool in_leaf = false;
  const pid_t init = CloneInit(cp, f, jf, in_leaf);
  if (dumpable != 1) prctl(PR_SET_DUMPABLE, dumpable);
  g_keeper_init = init;
  sigprocmask(SIG_UNBLOCK, &term, nullptr);  // an abort already asked for kills init now
  for (int fd : {f.sync_r, f.gate_child, f.out_w, f.err_w, f.devnull, f.broker, f.egress_child, f.net_child, f.stdin_r})
    if (fd >= 0) close(fd);
  SendRecord(f.status_w, Record::kInitPid, init, 0, "", "");
  ReleaseInit(cp, f, init, in_leaf);
  CloseContainer(cp, f, init);
}

}  // namespace oarbank::cage
