#include "sandbox/supervise/supervisor.h"

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

#include "sandbox/common/json_formats.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/plan/capabilities.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/launch/broker_handoff.h"
#include "sandbox/supervise/environment.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/fault_hooks.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/plan/plan.h"
#include "sandbox/common/text_encoding.h"

namespace oarbank::cage {
namespace {

using Clock = std::chrono::steady_clock;

// Setup that takes longer than this is refused (a wedged kernel, not a job).
constexpr auto kSetupDeadline = std::chrono::seconds(60);

// keeper and init -> supervisor, over the status pipe. Fixed size, well
// under PIPE_BUF, so each write is atomic and nothing is allocated.
enum class Record : int32_t { kInitPid = 1, kSetupFailed, kModuleExit, kClosed };
struct StatusRecord {
  Record kind;
  int32_t value;  // init's pid; the module's wait status; oom kills
  int32_t err;
  char stage[32];
  char detail[160];
};

// launcher -> supervisor, on the gate socket instead of kGateReady when a
// step fails, or after kGateGo when exec fails.
constexpr char kGateFailed = 'F';
struct GateFailure {
  char tag = kGateFailed;
  char stage[32] = {};
  int32_t err = 0;
  char detail[200] = {};
};

// The fds the job's processes keep; the numbers survive the forks.
struct JobFds {
  int status_w = -1;    // keeper, init -> supervisor
  int gate_child = -1;  // the launcher's end of the gate
  int sync_r = -1;      // keeper -> init: maps written, cgroup joined
  int sync_w = -1;
  int out_w = -1;
  int err_w = -1;
  int devnull = -1;
  int root_etc_tree = -1;  // keeper -> launcher: root's idmapped /etc (root_etc.h)
  int broker = -1;      // the module's broker connection (kJobBrokerFd in the launcher)
  int egress_child = -1;  // init -> supervisor: the proxy listener (job_egress.h)
  int net_child = -1;     // init <-> supervisor: egress-any's job network (job_network.h)
  int stdin_r = -1;     // the job's stdin when the caller's is relayed (else /dev/null)
};

// Everything the job's processes need, prepared before the fork: after it
// they only make system calls.
struct ChildPlan {
  const Plan* plan = nullptr;
  int clone_flags = 0;
  IdMaps maps;
  const CgroupLeaf* leaf = nullptr;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  std::optional<uid_t> run_as_uid;
  std::optional<gid_t> run_as_gid;
  pid_t supervisor = 0;
  uint64_t ignored_signals = 0;  // the agent's SIG_IGN set (exec keeps it)
  int egress_port = -1;  // egress-allowlist: init listens on 127.0.0.1:<port> in the job's netns
  bool pty = false;      // the launcher opens the job's terminal (job_devices.h)
};

// The job's user and mount namespaces are init's, and the launcher shares
// them; a job switched to run_as holds no capability there, so its launcher
// unshares its own (and then cannot share init's memory: vfork is out).
bool LauncherUnsharesNamespaces(const ChildPlan& cp) { return cp.run_as_uid.has_value(); }

// The signals this process ignores (SigIgn in /proc/self/status): exec
// resets handlers but keeps SIG_IGN, so the launcher resets exactly these.
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

void Copy(char* dst, size_t size, const char* src) { snprintf(dst, size, "%s", src); }

void SendRecord(int fd, Record kind, int value, int err, const char* stage, const char* detail) {
  StatusRecord r {};
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
  const pid_t launcher = LauncherUnsharesNamespaces(cp) ? fork() : vfork();
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

[[noreturn]] void KeeperMain(const ChildPlan& cp, const JobFds& f) {
  // SIGTERM (from the supervisor, or as its parent-death signal) kills init.
  sigset_t term;
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
  CloseAllBut({f.status_w, f.gate_child, f.sync_r, f.sync_w, f.out_w, f.err_w, f.devnull, f.broker,
               f.egress_child, f.net_child, f.stdin_r, cp.plan->root_etc_idmap_fd});

  // The job's /proc files must belong to its uid for the maps to be
  // written: an agent that changed uid without exec is not dumpable, and
  // init would inherit that. Only init is made dumpable, not the keeper.
  const int dumpable = prctl(PR_GET_DUMPABLE);
  if (dumpable != 1) prctl(PR_SET_DUMPABLE, 1);
  // Root's idmapped /etc can only be made here, in the initial user
  // namespace; the launcher mounts it in the job's.
  JobFds jf = f;
  if (cp.plan->root_etc_idmap_fd >= 0 && !cp.run_as_uid) {
    jf.root_etc_tree = MakeRootEtcTree(cp.plan->root_etc_idmap_fd);
    if (jf.root_etc_tree < 0) {
      SendRecord(f.status_w, Record::kSetupFailed, 0, -jf.root_etc_tree, "mount-namespace",
                 "idmap a copy of /etc for root");
      _exit(1);
    }
  }
  // The job's cgroup leaf is made here, not in the supervisor: only once
  // this process's parent-death signal is armed (and its parent checked
  // alive) is there always a process that removes it, whenever the
  // supervisor dies.
  if (cp.leaf != nullptr) {
    const char* field = "";
    const char* file = "";
    if (int err = cp.leaf->Make(&field, &file)) {
      char detail[160];
      if (*file == '\0') snprintf(detail, sizeof detail, "mkdir %s", cp.leaf->path().c_str());
      else snprintf(detail, sizeof detail, "write %s/%s", cp.leaf->path().c_str(), file);
      SendRecord(f.status_w, Record::kSetupFailed, 0, err, field, detail);
      _exit(1);
    }
  }
  // init starts in the job's cgroup leaf where the kernel can place it so.
  const int leaf_dir = cp.leaf != nullptr ? open(cp.leaf->path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  bool in_leaf = false;
  const pid_t init = CloneIntoNamespaces(cp.clone_flags, leaf_dir, &in_leaf);
  const int clone_err = errno;
  if (init == 0) {
    if (leaf_dir >= 0) close(leaf_dir);
    InitMain(cp, jf);
  }
  if (leaf_dir >= 0) close(leaf_dir);
  if (jf.root_etc_tree >= 0) close(jf.root_etc_tree);
  if (dumpable != 1) prctl(PR_SET_DUMPABLE, dumpable);
  if (init < 0) {
    if (cp.leaf != nullptr) cp.leaf->Remove();
    char detail[160];
    snprintf(detail, sizeof detail, "clone(%s): user namespaces refused here",
             (cp.clone_flags & CLONE_NEWNET) ? "NEWUSER|NEWPID|NEWIPC|NEWUTS|NEWNS|NEWNET"
                                             : "NEWUSER|NEWPID|NEWIPC|NEWUTS|NEWNS");
    SendRecord(f.status_w, Record::kSetupFailed, 0, clone_err, "namespaces", detail);
    _exit(1);
  }
  g_keeper_init = init;
  sigprocmask(SIG_UNBLOCK, &term, nullptr);  // an abort already asked for kills init now
  for (int fd : {f.sync_r, f.gate_child, f.out_w, f.err_w, f.devnull, f.broker, f.egress_child, f.net_child,
                 f.stdin_r})
    if (fd >= 0) close(fd);
  SendRecord(f.status_w, Record::kInitPid, init, 0, "", "");

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

  int status = 0;
  while (waitpid(init, &status, __WALL) < 0 && errno == EINTR) {
  }
  // init is gone, and with it every process of its pid namespace.
  long oom_kills = -1;
  int cleanup = 0;
  if (cp.leaf != nullptr) {
    oom_kills = cp.leaf->OomKills();
    cleanup = cp.leaf->Remove();
  }
  SendRecord(f.status_w, Record::kClosed, static_cast<int>(oom_kills), cleanup, "cgroup", "");
  _exit(0);
}

// ---- the supervisor's side ---------------------------------------------

struct Capture {
  std::string data;
  size_t max = 0;
  int spool = -1;  // the caller's file for every kept byte; `data` keeps the first kSpoolWindow
  int spool_err = 0;
  uint64_t kept = 0;
  bool truncated = false;
  uint64_t dropped = 0;
  void Take(const char* buf, size_t n) {
    const uint64_t room = max - std::min<uint64_t>(max, kept);
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(room, n));
    if (spool >= 0) {
      for (size_t done = 0; spool_err == 0 && done < keep;) {
        const ssize_t w = write(spool, buf + done, keep - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) spool_err = w < 0 ? errno : EIO;
        else done += static_cast<size_t>(w);
      }
      if (data.size() < kSpoolWindow) data.append(buf, std::min(keep, kSpoolWindow - data.size()));
    } else {
      data.append(buf, keep);
    }
    kept += keep;
    if (n > room) {
      truncated = true;
      dropped += n - room;
    }
  }
};

std::string ErrnoText(int err) { return err == 0 ? std::string() : std::string(": ") + strerror(err); }

// A write that never raises SIGPIPE (a reader that went away is EPIPE),
// whatever the caller's disposition: the signal is blocked in this thread
// around the write, and one it raised is taken before the mask is restored.
ssize_t WriteNoSigpipe(int fd, const char* buf, size_t n) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const ssize_t w = write(fd, buf, n);
  const int err = errno;
  if (w < 0 && err == EPIPE && !was_pending) {
    const timespec zero {};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return w;
}

// Bytes on their way to one of the caller's fds (a stream of the job's
// output) or into the job (its stdin). Written only when poll says the fd
// takes them, at most PIPE_BUF at a time, so a slow reader holds back the
// job's output (the pipe fills) but never the supervisor: the timeout
// still fires.
struct Outbox {
  int fd = -1;
  std::string pending;
  bool failed = false;  // the reader went away (EPIPE, EIO): the rest is dropped
  bool Busy() const { return fd >= 0 && !failed && !pending.empty(); }
  void Add(const char* buf, size_t n) {
    if (fd >= 0 && !failed) pending.append(buf, n);
  }
  void Flush() {
    const ssize_t w = WriteNoSigpipe(fd, pending.data(), std::min<size_t>(pending.size(), PIPE_BUF));
    if (w > 0) {
      pending.erase(0, static_cast<size_t>(w));
    } else if (w < 0 && errno != EINTR && errno != EAGAIN) {
      failed = true;
      pending.clear();
    }
  }
};

// The job's terminal takes the caller's window size (24x80 when the caller
// has no terminal); true when it changed.
bool CopyWindowSize(int terminal, int pty, winsize& last) {
  winsize now {};
  if (terminal < 0 || ioctl(terminal, TIOCGWINSZ, &now) != 0 || now.ws_row == 0) now = {24, 80, 0, 0};
  if (now.ws_row == last.ws_row && now.ws_col == last.ws_col && now.ws_xpixel == last.ws_xpixel &&
      now.ws_ypixel == last.ws_ypixel)
    return false;
  last = now;
  ioctl(pty, TIOCSWINSZ, &now);  // the kernel sends the job's foreground group SIGWINCH
  return true;
}

// How often the caller's window size is looked at while a job has a terminal.
constexpr auto kWindowPoll = std::chrono::milliseconds(200);

}  // namespace

enum class Phase { kAwaitReady, kAwaitExec, kRunning, kDone };

struct Job::State {
  Result result;
  Clock::time_point start;
  std::optional<Clock::time_point> deadline;
  std::atomic<Phase> phase{Phase::kAwaitReady};  // Freeze and Thaw may read it from another thread
  pid_t keeper = -1;
  pid_t init = -1;
  int gate = -1;
  int status = -1;
  int out = -1;
  int err = -1;
  std::optional<CgroupLeaf> leaf;
  std::string cgroup_line;
  std::vector<std::string> fresh;  // namespaces the gate checks
  std::vector<std::string> noexec;  // writable grants the gate checks are noexec
  std::vector<std::string> read_only;  // carve-outs the gate checks are read-only
  bool root_etc_idmapped = false;   // the gate checks a root job's /etc is the idmapped view
  Capture out_cap, err_cap;
  // Interactive use: the streams to the caller, the caller's input relayed
  // into the job (its stdin pipe, or the terminal), and the terminal.
  Outbox out_stream, err_stream;
  int in_src = -1;          // the caller's fd (not owned); -1 once it reached EOF
  Outbox to_job;            // into the stdin pipe (owned: stdin_w) or the pty
  int stdin_w = -1;
  bool want_pty = false;
  int pty = -1;             // the job's terminal's master, from the launcher
  int terminal = -1;        // the caller's terminal (not owned): window size
  winsize window {};
  Clock::time_point next_window_check;
  bool aborted = false;
  bool closed = false;      // the keeper reported the container closed
  long oom_kills = -1;
  bool module_exited = false;
  int module_status = 0;
  bool exec_failed = false;
  // egress-allowlist: the channel init sends the job's listener on, and the
  // proxy serving it until the job has ended (job_egress.h).
  int egress = -1;
  std::vector<std::string> egress_allow;
  JobEgressOptions egress_options;
  std::unique_ptr<egress::EgressProxy> proxy;
  // egress-any: init's channel, and the stack and ruleset of the job's
  // network namespace (job_network.h), stopped when the job has ended.
  int net = -1;
  bool job_network = false;
  JobNetworkSettings network_settings;
  std::unique_ptr<JobNetwork> network;
  // run --publish-netns: the symlink to the job's network namespace, made
  // at the gate and removed at the end.
  std::string publish_netns;
  bool published = false;

  void PublishNetns() {
    if (publish_netns.empty()) return;
    const std::string target = "/proc/" + std::to_string(init) + "/ns/net";
    if (symlink(target.c_str(), publish_netns.c_str()) != 0)
      return Refuse("publish-netns: " + publish_netns + ErrnoText(errno));
    published = true;
  }

  void UnpublishNetns() {
    if (!published) return;
    char buf[64] = {};
    const std::string target = "/proc/" + std::to_string(init) + "/ns/net";
    if (readlink(publish_netns.c_str(), buf, sizeof buf - 1) > 0 && target == buf) unlink(publish_netns.c_str());
    published = false;
  }

  ~State() {
    StopProxy();
    for (int fd : {gate, status, out, err, egress, net, stdin_w, pty})
      if (fd >= 0) close(fd);
  }

  // init's namespaces exist: rules, then the stack, then init may fork
  // the launcher.
  void OnJobNetwork() {
    char c = 0;
    const ssize_t n = recv(net, &c, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n != 1 || c != 'N') return CloseFd(net);  // init ended; the status pipe says why
    while (init <= 0 && status >= 0 && !aborted) AwaitStatus();
    if (init <= 0) return Refuse("network: the job's init never reported");
    auto started = JobNetwork::Start(init, network_settings, start + kSetupDeadline);
    if (!started.ok())
      return Refuse("sandbox: CAPABILITY_NOT_ENFORCED: net.egress-any (" + started.error().where + ": " +
                    started.error().what + ")");
    network = std::move(started).value();
    if (send(net, "G", 1, MSG_NOSIGNAL) != 1) return Refuse("network: release init" + ErrnoText(errno));
    CloseFd(net);
  }

  // Packets dropped, then the stack stopped; after the job has ended.
  void StopNetwork() {
    if (!network) return;
    result.container.net_dropped = network->Dropped();
    network->Stop();
    network.reset();
  }

  // Closes the listener and every proxied connection, joins its threads.
  void StopProxy() {
    if (!proxy) return;
    proxy->Stop();
    proxy.reset();
  }

  // Receives the listener init made in the job's network namespace and
  // serves it; the module is not released before this succeeded.
  void ServeEgress() {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kSetupDeadline - Clock::now());
    auto listener = ReceiveListenerFromChild(egress, left);
    CloseFd(egress);
    if (!listener.ok()) return Refuse(listener.error().where + ": " + listener.error().what);
    auto served = ServeJobEgress(egress_allow, listener.value(), egress_options);
    if (!served.ok()) return Refuse("egress: the job's proxy: " + served.error().where + ": " + served.error().what);
    proxy = std::move(served).value();
  }

  void Refuse(const std::string& reason) {
    Abort();
    if (result.fault != Fault::kNone) return;  // the first fault wins (a timeout during setup stays one)
    result.refused = true;
    result.fault = Fault::kRefused;
    result.reason = reason;
  }

  // Kills the whole container: the keeper kills init (and with it the pid
  // namespace); the cgroup leaf is killed at once as well.
  void Abort() {
    if (aborted || keeper <= 0) return;
    aborted = true;
    kill(keeper, SIGTERM);
    if (leaf) leaf->Kill();
  }

  void CloseFd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }

  // Takes one record if there is one (the fd is non-blocking).
  void OnStatus() {
    StatusRecord r {};
    const ssize_t n = read(status, &r, sizeof r);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n != static_cast<ssize_t>(sizeof r)) {
      CloseFd(status);  // EOF: keeper and init are both gone
      return;
    }
    switch (r.kind) {
      case Record::kInitPid: init = r.value; break;
      case Record::kSetupFailed:
        Refuse(std::string(r.stage) + ": " + r.detail + ErrnoText(r.err));
        break;
      case Record::kModuleExit:
        module_exited = true;
        module_status = r.value;
        break;
      case Record::kClosed:
        closed = true;
        oom_kills = r.value;
        if (r.err != 0 && leaf)
          result.container.cgroup_detail += "; removing the leaf failed" + ErrnoText(r.err);
        break;
    }
  }

  // Waits (bounded by the setup deadline) for the next status record.
  void AwaitStatus() {
    pollfd p {status, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kSetupDeadline - Clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count()))) == 0) return Refuse("setup took longer than 60 s");
    OnStatus();
  }

  void Verify(pid_t launcher) {
    // init's pid was sent before init was released, so it is in the pipe.
    while (init <= 0 && status >= 0 && !aborted) AwaitStatus();
    if (init <= 0) return Refuse("gate: the job's init never reported");
    // The keeper made the leaf before it cloned init.
    if (leaf) {
      leaf->ReadFeatures();
      result.container.cgroup_detail = std::string("leaf with ") +
                                        (leaf->has_kill() ? "cgroup.kill" : "no cgroup.kill (Linux < 5.14)") +
                                        (leaf->has_freeze() ? ", cgroup.freeze" : "") + ", limits " +
                                        result.container.limits;
    }
    FaultPause("supervisor-init-reported", keeper, init);
    const GateCheck check = VerifyConfined(launcher, init, cgroup_line, fresh, noexec, root_etc_idmapped, read_only,
                                           /*job_devices=*/true);
    result.container.verified = check.reading;
    if (!check.ok) return Refuse("gate: the launcher is not confined: " + check.reason);
    if (want_pty && pty < 0) return Refuse("terminal: the launcher did not hand over the job's terminal");
    if (job_network) {
      const std::string why = network ? network->Verify() : "not set up";
      if (!why.empty()) return Refuse("gate: the job's network: " + why);
    }
    if (egress >= 0) {
      ServeEgress();
      if (aborted) return;
    }
    PublishNetns();
    if (aborted) return;
    if (send(gate, &kGateGo, 1, MSG_NOSIGNAL) != 1) return Refuse("gate: release" + ErrnoText(errno));
    phase = Phase::kAwaitExec;
  }

  void OnGate() {
    GateFailure failure;
    char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))];
    iovec iov {&failure, sizeof failure};
    msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(gate, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      // EOF. Before the gate: the launcher died. After it: exec succeeded
      // (the socket is close-on-exec).
      CloseFd(gate);
      if (phase == Phase::kAwaitReady) {
        // A setup failure the keeper or init reported explains it better.
        while (status >= 0 && !module_exited && result.fault == Fault::kNone) AwaitStatus();
        Refuse("gate: the launcher ended before it reached the gate");
      }
      if (phase == Phase::kAwaitExec) phase = Phase::kRunning;
      return;
    }
    const char tag = reinterpret_cast<const char*>(&failure)[0];
    int passed = -1;  // an fd the launcher sent (only its terminal may come)
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
        if (passed >= 0) close(passed);
        memcpy(&passed, CMSG_DATA(c), sizeof passed);
      }
    if (tag == kGateTerminal && n == 1 && passed >= 0 && want_pty && pty < 0 && phase == Phase::kAwaitReady) {
      pty = passed;
      fcntl(pty, F_SETFL, fcntl(pty, F_GETFL) | O_NONBLOCK);
      CopyWindowSize(terminal, pty, window);
      next_window_check = Clock::now() + kWindowPoll;
      to_job.fd = pty;
      return;
    }
    if (passed >= 0) close(passed);
    if (tag == kGateFailed && n == static_cast<ssize_t>(sizeof failure)) {
      const std::string what =
          std::string(failure.stage) + ": " + failure.detail + ErrnoText(failure.err);
      // After the release only exec itself may fail and still count as a
      // job: a step that refuses there (a grant no longer at its path)
      // refuses the job, as it does before the gate. Nothing ran.
      if (phase == Phase::kAwaitExec && strcmp(failure.stage, StepName(LaunchStep::kExec)) == 0) {
        exec_failed = true;
        result.fault = Fault::kExec;
        result.reason = what;
        phase = Phase::kRunning;
      } else {
        Refuse(what);
      }
      return;
    }
    if (tag == kGateReady && n == 1 && phase == Phase::kAwaitReady) {
      pid_t launcher = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
          launcher = reinterpret_cast<const ucred*>(CMSG_DATA(c))->pid;
      if (launcher <= 0) return Refuse("gate: the launcher's pid did not arrive");
      return Verify(launcher);
    }
    Refuse("gate: unexpected message from the launcher");
  }

  // The job's output: kept up to the cap, streamed whole. A terminal's
  // master reads EIO once nothing of the job holds the terminal: its end.
  void OnOutput(int& fd, Capture& cap, Outbox& stream) {
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      CloseFd(fd);
      return;
    }
    cap.Take(buf, static_cast<size_t>(n));
    stream.Add(buf, static_cast<size_t>(n));
  }

  // The caller's input, relayed while the job may take it. At EOF the stdin
  // pipe is closed once drained; a terminal gets its EOF character.
  void OnInput() {
    char buf[4096];
    const ssize_t n = read(in_src, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n > 0) return to_job.Add(buf, static_cast<size_t>(n));
    in_src = -1;
    // The master's own settings do not hold the job's EOF character: ^D,
    // the default, which a terminal in canonical mode reads as EOF.
    if (pty >= 0) to_job.Add("\x04", 1);
    OnJobInputWritable();
  }

  void OnJobInputWritable() {
    if (to_job.Busy()) to_job.Flush();
    // Nobody reads it any more, or everything arrived: the job sees EOF.
    if (stdin_w >= 0 && (to_job.failed || (in_src < 0 && to_job.pending.empty()))) {
      CloseFd(stdin_w);
      to_job.fd = -1;
    }
  }

  // Pumps events until `done()` or nothing of the job is left (and all of
  // its output has reached the caller's streams).
  template <typename Done>
  void Pump(Done done) {
    while (!done() && (gate >= 0 || status >= 0 || out >= 0 || err >= 0 || pty >= 0 || out_stream.Busy() ||
                       err_stream.Busy())) {
      enum class Event { kGate, kStatus, kNet, kOut, kErr, kPty, kIn, kToJob, kOutStream, kErrStream };
      pollfd fds[10];
      Event events[10];
      nfds_t nfds = 0;
      auto want = [&](int fd, short what, Event e) {
        if (fd < 0) return;
        fds[nfds] = {fd, what, 0};
        events[nfds++] = e;
      };
      want(gate, POLLIN, Event::kGate);
      want(status, POLLIN, Event::kStatus);
      want(net, POLLIN, Event::kNet);  // egress-any's job network (job_network.h)
      // A stream the caller is slow to take holds its source back.
      if (!out_stream.Busy()) {
        want(out, POLLIN, Event::kOut);
        want(pty, POLLIN, Event::kPty);
      }
      if (!err_stream.Busy()) want(err, POLLIN, Event::kErr);
      if (to_job.fd >= 0 && !to_job.failed && to_job.pending.empty()) want(in_src, POLLIN, Event::kIn);
      if (to_job.Busy()) want(to_job.fd, POLLOUT, Event::kToJob);
      if (out_stream.Busy()) want(out_stream.fd, POLLOUT, Event::kOutStream);
      if (err_stream.Busy()) want(err_stream.fd, POLLOUT, Event::kErrStream);
      const auto now = Clock::now();
      int wait_ms = -1;
      auto consider = [&](Clock::time_point t) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
        wait_ms = wait_ms < 0 ? static_cast<int>(std::max<long long>(0, ms))
                              : std::min(wait_ms, static_cast<int>(std::max<long long>(0, ms)));
      };
      const auto setup_deadline = start + kSetupDeadline;
      const bool in_setup = phase == Phase::kAwaitReady || phase == Phase::kAwaitExec;
      if (in_setup && !aborted) consider(setup_deadline);
      if (deadline && !aborted) consider(*deadline);
      if (pty >= 0 && terminal >= 0) consider(next_window_check);
      const int ready = poll(fds, nfds, wait_ms);
      if (ready < 0 && errno != EINTR) {
        Refuse(std::string("poll") + ErrnoText(errno));
        break;
      }
      const auto later = Clock::now();
      if (in_setup && !aborted && later >= setup_deadline) Refuse("setup took longer than 60 s");
      if (deadline && !aborted && later >= *deadline && result.fault == Fault::kNone) {
        result.fault = Fault::kTimeout;
        char text[64];
        snprintf(text, sizeof text, "killed at the timeout of %.3g s",
                 std::chrono::duration<double>(*deadline - start).count());
        result.reason = text;
        Abort();
      }
      if (pty >= 0 && terminal >= 0 && later >= next_window_check) {
        CopyWindowSize(terminal, pty, window);
        next_window_check = later + kWindowPoll;
      }
      for (nfds_t i = 0; ready > 0 && i < nfds; ++i) {
        if (fds[i].revents == 0) continue;
        switch (events[i]) {
          case Event::kGate: OnGate(); break;
          case Event::kStatus: OnStatus(); break;
          case Event::kNet: OnJobNetwork(); break;
          case Event::kOut: OnOutput(out, out_cap, out_stream); break;
          case Event::kErr: OnOutput(err, err_cap, err_stream); break;
          case Event::kPty:
            // The pty is also the job's stdin: it goes with its output.
            OnOutput(pty, out_cap, out_stream);
            if (pty < 0) to_job.fd = -1;
            break;
          case Event::kIn: OnInput(); break;
          case Event::kToJob: OnJobInputWritable(); break;
          case Event::kOutStream: out_stream.Flush(); break;
          case Event::kErrStream: err_stream.Flush(); break;
        }
      }
    }
  }

  // Runs the job to its end; the result stays in `result`.
  const Result& Finish() {
    if (phase == Phase::kDone) return result;
    Pump([] { return false; });
    if (keeper > 0) {
      while (waitpid(keeper, nullptr, __WALL) < 0 && errno == EINTR) {
      }
      keeper = -1;
    }
    // Nothing of the job is left to connect to the proxy.
    StopProxy();
    CloseFd(egress);
    CloseFd(net);
    UnpublishNetns();
    StopNetwork();
    // A keeper that died without closing the container: clean up here.
    if (leaf && !closed) {
      leaf->Kill();
      leaf->Remove();
    }
    if (result.fault != Fault::kRefused && result.fault != Fault::kExec && oom_kills > 0) {
      result.fault = Fault::kOom;
      result.reason = "killed by the kernel at memory.max (" + std::to_string(oom_kills) + " OOM kill" +
                      (oom_kills == 1 ? "" : "s") + " in " + leaf->path() + ")";
    }
    if (result.fault == Fault::kRefused) {
      result.exit_code = -1;
      result.signal = 0;
    } else if (module_exited && WIFEXITED(module_status)) {
      result.exit_code = WEXITSTATUS(module_status);
    } else if (module_exited && WIFSIGNALED(module_status)) {
      result.signal = WTERMSIG(module_status);
    } else {
      result.signal = SIGKILL;  // the container was killed before the module ended
    }
    result.stdout_text = std::move(out_cap.data);
    result.stderr_text = std::move(err_cap.data);
    result.stdout_truncated = out_cap.truncated;
    result.stderr_truncated = err_cap.truncated;
    result.stdout_dropped = out_cap.dropped;
    result.stderr_dropped = err_cap.dropped;
    result.stdout_bytes = out_cap.kept;
    result.stderr_bytes = err_cap.kept;
    result.stdout_spooled = out_cap.spool >= 0;
    result.stderr_spooled = err_cap.spool >= 0;
    for (const auto& [cap, name] : {std::pair{&out_cap, "stdout"}, {&err_cap, "stderr"}})
      if (cap->spool_err != 0)
        result.spool_error += std::string(result.spool_error.empty() ? "" : "; ") + name + " spool file: write" +
                              ErrnoText(cap->spool_err);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    phase = Phase::kDone;
    return result;
  }
};

namespace {

std::once_flag g_collect_once;

}  // namespace

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kNone: return "none";
    case Fault::kRefused: return "refused";
    case Fault::kExec: return "exec";
    case Fault::kTimeout: return "timeout";
    case Fault::kOom: return "oom";
  }
  return "?";
}

Job::Job(std::unique_ptr<State> state) : state_(std::move(state)) {}
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&&) noexcept = default;
Job::~Job() {
  if (state_ && state_->phase != Phase::kDone) {
    state_->Abort();
    state_->Finish();
  }
}

bool Job::refused() const { return state_->result.refused; }

std::string Job::Freeze() {
  if (!state_->leaf) return "cgroup.freeze unavailable: " + state_->result.container.cgroup_detail;
  if (state_->phase == Phase::kDone) return "the job has ended";
  if (int err = state_->leaf->Freeze(true)) return "cgroup.freeze" + ErrnoText(err);
  return "";
}

std::string Job::Thaw() {
  if (!state_->leaf) return "cgroup.freeze unavailable: " + state_->result.container.cgroup_detail;
  if (state_->phase == Phase::kDone) return "the job has ended";
  if (int err = state_->leaf->Freeze(false)) return "cgroup.freeze" + ErrnoText(err);
  return "";
}

Result Job::Wait() { return state_->Finish(); }

// The proof a job runs under ("proven (...)" or "unproven (operator
// override)"), or why it may not run.
static oarbank::Expected<std::string> CheckProof(const Policy& policy, const HostFacts& host, const RunOptions& options) {
  if (options.unproven) return std::string("unproven (operator override)");
  const std::string path = options.attestation_path.empty() ? AttestationPath() : options.attestation_path;
  const Attestation attestation = ReadAttestation(path, BindingForThisProcess(host, LauncherHash::kWhenNeeded));
  if (std::string gap = ProofGap(attestation, policy); !gap.empty())
    return Error{"battery.proven", "sandbox: CAPABILITY_NOT_ENFORCED: " + gap};
  return "proven (" + path + ")";
}

Job Start(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options) {
  auto state = std::make_unique<Job::State>();
  Job::State& s = *state;
  s.start = Clock::now();
  if (options.timeout.count() > 0) s.deadline = s.start + options.timeout;
  s.out_cap.max = options.stdout_max;
  s.err_cap.max = options.stderr_max;
  s.out_cap.spool = options.stdout_fd;
  s.err_cap.spool = options.stderr_fd;
  s.out_stream.fd = options.stream_stdout_fd;
  s.err_stream.fd = options.stream_stderr_fd;
  s.want_pty = options.pty;
  s.terminal = options.pty ? options.terminal_fd : -1;
  Container& box = s.result.container;
  // Refused before anything was spawned.
  auto refuse = [&](const std::string& reason) {
    s.result.refused = true;
    s.result.fault = Fault::kRefused;
    s.result.reason = reason;
    s.result.seconds = std::chrono::duration<double>(Clock::now() - s.start).count();
    s.phase = Phase::kDone;
    return Job(std::move(state));
  };

  if (argv.empty()) return refuse("argv: empty");
  HostFacts host = ProbeHost(options.landlock_abi_cap);
  host.job_network = SupervisedJobNetworkFacts(policy.net().mode == NetMode::kEgressAny);
  ProbeRootEtc(host);
  host.etc_view.proof_tree.reset();  // the keeper makes each job's copy (MakeRootEtcTree)
  const int floor = std::max(1, options.abi_floor);
  if (host.landlock_abi < floor)
    return refuse("abi_floor: this host's Landlock ABI is " + std::to_string(host.landlock_abi) +
                  ", below the floor " + std::to_string(floor));
  // No quiet fallback: without user namespaces there is no job.
  if (!host.user_namespaces)
    return refuse("namespaces: user namespaces are refused here: " + host.user_namespaces_detail);
  if ((options.run_as_uid || options.run_as_gid) && geteuid() != 0)
    return refuse("run_as: needs a root supervisor");

  Plan plan = PlanConfinement(policy, host);
  if (plan.placement.verdict != Verdict::kOk)
    return refuse(PlacementLine(plan.placement));
  if (options.shm_max < 4096) return refuse("shm_max: /dev/shm needs at least 4096 bytes");
  PlanJobDevices(plan, options.shm_max);
  // Cage-before-capability: only what the battery proved here runs.
  if (auto proof = CheckProof(policy, host, options); !proof.ok()) return refuse(proof.error().what);
  else box.proof = proof.value();

  const NamespacePlan ns = PlanJobNamespaces(policy);
  box.namespaces = ns.Names();
  box.net = ns.net_detail;
  s.fresh = {"user", "pid", "ipc", "uts", "mnt"};
  if (ns.net) s.fresh.push_back("net");
  if (plan.writable_noexec) s.noexec = plan.writable_binds;
  s.read_only = plan.read_only_binds;
  s.root_etc_idmapped = plan.root_etc_idmap_fd >= 0 && !options.run_as_uid;

  // The process container's cgroup leaf, where the agent's cgroup is delegated.
  const CgroupDelegation delegation = DetectCgroupDelegation(host.cgroup);
  const LeafLimits limits = PlanLeafLimits(policy.limits(), options.hard_limits, delegation.usable && delegation.pids);
  box.limits = DescribeLeafLimits(limits);
  for (const auto& [needed, id] : {std::pair{limits.needs_memory(), CapabilityId::kLimitsMemory},
                                   {limits.needs_cpu(), CapabilityId::kLimitsCpu}}) {
    if (!needed) continue;
    const CapabilityStatus status = Assess(id, host);
    if (status.status != Status::kEnforced)
      return refuse(std::string("sandbox: CAPABILITY_NOT_ENFORCED: ") + CapabilityName(id) + " (" + status.detail +
                    ")");
  }
  box.cgroup_detail = delegation.detail;
  if (delegation.usable) {
    std::call_once(g_collect_once, [&] { CollectStaleLeaves(delegation.base); });
    // Named here, made by the keeper (KeeperMain).
    auto leaf = CgroupLeaf::Prepare(delegation, limits);
    if (!leaf.ok())
      return refuse(leaf.error().where + ": " + leaf.error().what);
    s.leaf = std::move(leaf).value();
    box.cgroup = s.leaf->path();
    s.cgroup_line = CgroupProcLine(host.cgroup, s.leaf->path());
  }

  // Everything the children need, built now: after the fork they allocate nothing.
  ChildPlan cp;
  cp.plan = &plan;
  cp.clone_flags = ns.clone_flags;
  cp.maps = PlanIdMaps(geteuid(), getegid(), options.run_as_uid, options.run_as_gid);
  cp.leaf = s.leaf ? &*s.leaf : nullptr;
  std::vector<std::string> args = argv;
  for (auto& a : args) cp.argv.push_back(a.data());
  cp.argv.push_back(nullptr);
  // The broker grant (broker_handoff.h): below Landlock ABI 9 the job holds
  // one connection, made here in the agent's namespaces, as kJobBrokerFd.
  std::map<std::string, std::string> named_env = options.env;
  int broker_fd = -1;
  if (plan.broker == BrokerHandoff::kInheritedFd) {
    auto connected = ConnectBroker(*policy.broker());
    if (!connected.ok()) {
      if (s.leaf) s.leaf->Remove();
      return refuse(connected.error().where + ": " + connected.error().what);
    }
    broker_fd = connected.value();
  }
  if (plan.broker != BrokerHandoff::kNone)
    named_env["OARBANK_BROKER"] = BrokerEnvironmentValue(plan.broker, *policy.broker(), kJobBrokerFd);
  std::vector<std::string> env = BuildModuleEnvironment(policy, named_env);
  for (auto& e : env) cp.envp.push_back(e.data());
  cp.envp.push_back(nullptr);
  if (options.cwd) {
    cp.cwd = *options.cwd;
  } else {
    char cwd[4096];
    cp.cwd = getcwd(cwd, sizeof cwd) ? cwd : "/";
  }
  cp.run_as_uid = options.run_as_uid;
  cp.run_as_gid = options.run_as_gid;
  cp.supervisor = getpid();
  cp.ignored_signals = IgnoredSignals();
  s.publish_netns = options.publish_netns;
  if (ns.job_network) {
    s.job_network = true;
    if (options.egress) s.network_settings.test_public = options.egress->test_public;
  }
  cp.pty = options.pty;
  if (ns.egress_listener) {
    cp.egress_port = policy.net().proxy_port;
    s.egress_allow = policy.net().allow;
    if (options.egress) s.egress_options = *options.egress;
  }

  JobFds f;
  int status_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, sync_pipe[2] = {-1, -1};
  int gate_pair[2] = {-1, -1}, egress_pair[2] = {-1, -1}, net_pair[2] = {-1, -1}, stdin_pipe[2] = {-1, -1};
  const int one = 1;
  // The caller's input goes to the job through a pipe of its own (or the
  // terminal): the job never holds the caller's fd, a terminal least of all.
  const bool stdin_relay = options.stdin_fd >= 0 && !options.pty;
  f.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (f.devnull < 0 || pipe2(status_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(sync_pipe, O_CLOEXEC) != 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, gate_pair) != 0 ||
      setsockopt(gate_pair[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0 ||
      (ns.egress_listener && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, egress_pair) != 0) ||
      (ns.job_network && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, net_pair) != 0) ||
      (stdin_relay && pipe2(stdin_pipe, O_CLOEXEC) != 0)) {
    const int err = errno;
    for (int fd : {f.devnull, status_pipe[0], status_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1],
                   sync_pipe[0], sync_pipe[1], gate_pair[0], gate_pair[1], egress_pair[0], egress_pair[1],
                   net_pair[0], net_pair[1], broker_fd, stdin_pipe[0], stdin_pipe[1]})
      if (fd >= 0) close(fd);
    if (s.leaf) s.leaf->Remove();
    return refuse("job-setup: pipes" + ErrnoText(err));
  }
  f.broker = broker_fd;
  f.status_w = status_pipe[1];
  f.out_w = out_pipe[1];
  f.err_w = err_pipe[1];
  f.sync_r = sync_pipe[0];
  f.sync_w = sync_pipe[1];
  f.gate_child = gate_pair[1];
  f.egress_child = egress_pair[1];
  s.egress = egress_pair[0];
  f.net_child = net_pair[1];
  s.net = net_pair[0];
  s.status = status_pipe[0];
  s.out = out_pipe[0];
  s.err = err_pipe[0];
  s.gate = gate_pair[0];
  f.stdin_r = stdin_pipe[0];
  s.stdin_w = stdin_pipe[1];
  s.to_job.fd = s.stdin_w;  // the pty, once the launcher sends it
  s.in_src = options.stdin_fd >= 0 && (stdin_relay || options.pty) ? options.stdin_fd : -1;
  if (s.stdin_w >= 0) fcntl(s.stdin_w, F_SETFL, fcntl(s.stdin_w, F_GETFL) | O_NONBLOCK);
  // Poll says when; a read never blocks the supervisor (the module could
  // not drain its output while it did).
  for (int fd : {s.status, s.out, s.err}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  FaultPause("supervisor-before-keeper");
  s.keeper = fork();
  if (s.keeper == 0) KeeperMain(cp, f);
  const int fork_err = errno;
  FaultPause("supervisor-after-keeper", s.keeper);
  for (int fd : {f.status_w, f.out_w, f.err_w, f.sync_r, f.sync_w, f.gate_child, f.devnull}) close(fd);
  if (f.stdin_r >= 0) close(f.stdin_r);
  if (f.broker >= 0) close(f.broker);
  if (f.egress_child >= 0) close(f.egress_child);
  if (f.net_child >= 0) close(f.net_child);
  if (s.keeper < 0) {
    s.keeper = -1;
    s.Refuse("job-setup: fork" + ErrnoText(fork_err));
    s.Finish();
    return Job(std::move(state));
  }
  // Up to the exec (or the refusal): the gate is verified in here.
  s.Pump([&s] { return s.phase != Phase::kAwaitReady && s.phase != Phase::kAwaitExec; });
  if (s.result.fault == Fault::kRefused || s.phase == Phase::kAwaitReady || s.phase == Phase::kAwaitExec) {
    if (s.result.fault != Fault::kRefused) s.Refuse("gate: the job ended during setup");
    s.Finish();
  }
  return Job(std::move(state));
}

Result RunPolicy(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options) {
  return Start(policy, argv, options).Wait();
}

namespace {

// A Spec path as the policy will read it (symlinks resolved), or itself
// when it cannot be resolved (ParsePolicy then names it).
std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

bool WithinOrAt(const std::string& child, const std::string& parent) {
  return child == parent || (child.size() > parent.size() && child.compare(0, parent.size(), parent) == 0 &&
                             (parent == "/" || child[parent.size()] == '/'));
}

// The worktree's history: each path inside a writable directory becomes a
// read_only carve-out (appended to `read_only`); those outside every one
// are returned, to be granted read-only. A directory the caller named
// writable itself stays writable. (With a read-only worktree `writable`
// holds only the scratch and state: the history inside the worktree is
// read-only already, and granting it again is harmless.)
nlohmann::json PlaceHistory(const GitCarveOuts& git, const std::vector<std::string>& writable,
                            nlohmann::json& read_only) {
  nlohmann::json outside = nlohmann::json::array();
  for (const auto& path : git.Paths()) {
    if (std::find(writable.begin(), writable.end(), path) != writable.end()) continue;
    const bool inside =
        std::any_of(writable.begin(), writable.end(), [&](const std::string& w) { return WithinOrAt(path, w); });
    (inside ? read_only : outside).push_back(path);
  }
  return outside;
}

}  // namespace

oarbank::Expected<Policy> PolicyForSpec(const Spec& spec) {
  const bool writable_worktree = !spec.worktree.empty() && spec.worktree_writable;
  const bool exec_writable = spec.exec_writable.value_or(writable_worktree);
  nlohmann::json doc = {{"contract", 1},
                        {"role", "runner"},
                        {"net", {{"mode", spec.egress_any ? "egress-any" : "none"}}},
                        {"exec_writable", exec_writable}};
  if (!spec.allow.empty()) {
    // An allowlist narrows what egress-any would give: asking for both is a mistake, never the wider one.
    if (spec.egress_any) return Error{"allow", "an allowlist and egress_any exclude each other"};
    doc["net"] = {{"mode", "egress-allowlist"}, {"allow", spec.allow}, {"proxy_port", kCageProxyPort}};
  }
  // Spec field for each policy field, so an error names what the caller wrote.
  std::map<std::string, std::string> origin{{"net.allow", "allow"}, {"state", "state_dirs"}};
  std::vector<std::string> writable;  // canonical, for placing the history
  if (writable_worktree) {
    doc["work"] = spec.worktree;
    origin["work"] = "worktree";
    writable.push_back(Canonical(spec.worktree));
    if (!spec.scratch.empty()) {
      doc["data"] = spec.scratch;
      origin["data"] = "scratch";
    }
    // A runner names a bundle; the base system's /usr stands in and grants
    // nothing new.
    doc["bundle"] = "/usr";
  } else {
    doc["bundle"] = spec.worktree.empty() ? "/usr" : spec.worktree;
    origin["bundle"] = "worktree";
    if (!spec.scratch.empty()) {
      doc["work"] = spec.scratch;
      origin["work"] = "scratch";
    }
  }
  if (!spec.scratch.empty()) writable.push_back(Canonical(spec.scratch));
  if (!spec.state_dirs.empty()) doc["state"] = spec.state_dirs;
  for (const auto& dir : spec.state_dirs) writable.push_back(Canonical(dir));
  nlohmann::json read_only = spec.read_only;
  nlohmann::json tools = nlohmann::json::array();
  std::vector<std::string> tool_origin;  // tools[i] came from this Spec field
  for (const auto& [field, paths] : {std::pair{"read_dirs", &spec.read_dirs}, {"read_files", &spec.read_files}}) {
    if (paths->empty()) continue;
    tools.push_back({{"id", field}, {"paths", *paths}});
    tool_origin.push_back(field);
  }
  struct stat worktree {};
  if (!spec.worktree.empty() && stat(spec.worktree.c_str(), &worktree) == 0 && S_ISDIR(worktree.st_mode)) {
    auto git = ResolveGitCarveOuts(Canonical(spec.worktree));
    if (!git.ok()) return Error{kGitCarveOutField, git.error().where + ": " + git.error().what};
    if (git.value()) {
      const nlohmann::json outside = PlaceHistory(*git.value(), writable, read_only);
      if (!outside.empty()) {
        tools.push_back({{"id", "git"}, {"paths", outside}});
        tool_origin.push_back(kGitCarveOutField);
      }
    }
  }
  if (!tools.empty()) doc["tools"] = tools;
  if (!read_only.empty()) doc["read_only"] = read_only;
  auto policy = ParsePolicy(doc.dump());
  if (policy.ok()) return policy;
  Error e = policy.error();
  for (const auto& [field, from] : origin)
    if (e.where == field || e.where.rfind(field + "[", 0) == 0) e.where = from + e.where.substr(field.size());
  for (size_t i = 0; i < tool_origin.size(); ++i) {
    const std::string prefix = "tools[" + std::to_string(i) + "].paths";
    if (e.where.rfind(prefix, 0) == 0) e.where = tool_origin[i] + e.where.substr(prefix.size());
  }
  if (e.where.rfind("read_only[", 0) == 0 && std::stoul(e.where.substr(10)) >= spec.read_only.size())
    e.where = kGitCarveOutField;
  return e;
}

Result Run(const Spec& spec, const RunOptions& options) {
  auto policy = PolicyForSpec(spec);
  if (!policy.ok()) {
    Result r;
    r.refused = true;
    r.fault = Fault::kRefused;
    r.reason = PolicyErrorLine(policy.error());
    return r;
  }
  RunOptions o = options;
  o.abi_floor = std::max(o.abi_floor, spec.abi_floor);
  if (!spec.scratch.empty()) {
    o.env.emplace("HOME", spec.scratch);
    o.env.emplace("TMPDIR", spec.scratch);
  }
  if (!o.cwd) o.cwd = spec.worktree.empty() ? (spec.scratch.empty() ? "/" : spec.scratch) : spec.worktree;
  return RunPolicy(policy.value(), spec.argv, o);
}

Result Run(const Spec& spec) { return Run(spec, RunOptions{}); }

Availability AssessAvailability(const HostFacts& host, bool namespaces_ok, const std::string& namespaces_detail) {
  Availability a;
  std::vector<std::string> why;
  // The baseline every job has: no grants beyond a read-only bundle, net
  // none, nothing written executable.
  auto baseline = ParsePolicy(R"({"contract": 1, "role": "probe", "bundle": "/usr"})");
  if (!baseline.ok()) {
    why.push_back(PolicyErrorLine(baseline.error()));
  } else {
    const Placement placement = Place(baseline.value(), host);
    if (placement.verdict != Verdict::kOk) why.push_back(PlacementLine(placement));
  }
  if (!host.user_namespaces) why.push_back("user namespaces: " + host.user_namespaces_detail);
  else if (!namespaces_ok) why.push_back("namespaces: " + namespaces_detail);
  a.available = why.empty();
  for (const auto& w : why) a.reason += (a.reason.empty() ? "" : "; ") + w;
  return a;
}

Availability CheckAvailability() {
  const HostFacts host = ProbeHost();
  const NamespaceProbe& ns = ProbeJobNamespaces();
  Availability a = AssessAvailability(host, ns.ok, ns.detail);
  const Attestation attestation = ReadAttestation(AttestationPath(), BindingForThisProcess(host, LauncherHash::kWhenNeeded));
  a.attested = attestation.present;
  a.proven_classes = attestation.proven_classes;
  a.proof_detail = attestation.detail;
  return a;
}

bool Available() {
  const Availability a = CheckAvailability();
  if (!a.available) return false;
  auto policy = PolicyForSpec(Spec{});
  return policy.ok() && std::find(a.proven_classes.begin(), a.proven_classes.end(), PolicyClass(policy.value())) !=
                            a.proven_classes.end();
}

nlohmann::ordered_json ResultReport(const Result& r) {
  const GateReading& v = r.container.verified;
  // Output that is not UTF-8 (binary, or a character cut at the cap) goes
  // as base64, byte for byte; the encoding field says which.
  auto text = [](const std::string& s) { return IsUtf8(s) ? s : Base64(s); };
  auto encoding = [](const std::string& s) { return IsUtf8(s) ? "utf-8" : "base64"; };
  return {
      {"format", kRunFormat},
      {"exit_code", r.exit_code},
      {"signal", r.signal},
      {"refused", r.refused},
      {"fault", FaultName(r.fault)},
      {"reason", r.reason},
      {"stdout", text(r.stdout_text)},
      {"stderr", text(r.stderr_text)},
      {"stdout_encoding", encoding(r.stdout_text)},
      {"stderr_encoding", encoding(r.stderr_text)},
      {"stdout_truncated", r.stdout_truncated},
      {"stderr_truncated", r.stderr_truncated},
      {"stdout_dropped", r.stdout_dropped},
      {"stderr_dropped", r.stderr_dropped},
      {"stdout_bytes", r.stdout_bytes},
      {"stderr_bytes", r.stderr_bytes},
      {"stdout_spooled", r.stdout_spooled},
      {"stderr_spooled", r.stderr_spooled},
      {"spool_error", r.spool_error},
      {"seconds", r.seconds},
      {"container",
       {{"namespaces", r.container.namespaces},
        {"net", r.container.net},
        {"cgroup", r.container.cgroup},
        {"cgroup_detail", r.container.cgroup_detail},
        {"limits", r.container.limits},
        {"proof", r.container.proof},
        {"net_dropped", r.container.net_dropped},
        {"verified",
         {{"NoNewPrivs", v.no_new_privs},
          {"Seccomp", v.seccomp},
          {"Seccomp_filters", v.seccomp_filters},
          {"CapEff", v.cap_eff},
          {"CapPrm", v.cap_prm},
          {"CapInh", v.cap_inh},
          {"CapAmb", v.cap_amb}}}}},
  };
}

nlohmann::ordered_json SupervisorReport(const HostFacts& host) {
  const NamespaceProbe& ns = ProbeJobNamespaces();
  const Availability a = AssessAvailability(host, ns.ok, ns.detail);
  const CgroupDelegation d = DetectCgroupDelegation(host.cgroup);
  auto limit = [&](CapabilityId id) {
    const CapabilityStatus s = Assess(id, host);
    return nlohmann::ordered_json{{"status", StatusName(s.status)}, {"detail", s.detail}};
  };
  const Attestation attestation = ReadAttestation(AttestationPath(), BindingForThisProcess(host, LauncherHash::kWhenNeeded));
  HostFacts supervised = host;
  supervised.job_network = SupervisedJobNetworkFacts(true);
  const CapabilityStatus egress_any = Assess(CapabilityId::kNetEgressAny, supervised);
  return {
      {"available", a.available},
      {"reason", a.reason},
      {"proof",
       {{"attestation", AttestationPath()},
        {"attested", attestation.present},
        {"proven_classes", attestation.proven_classes},
        {"detail", attestation.detail},
        {"rule", "run, cage::Run, RunPolicy and Start refuse a policy class the attestation does not prove "
                 "(battery.proven), unless started with --unproven (RunOptions::unproven)"}}},
      {"namespaces",
       {{"available", host.user_namespaces && ns.ok},
        {"detail", host.user_namespaces ? ns.detail : host.user_namespaces_detail},
        {"job", "user, pid (init reaps; fresh /proc), ipc, uts, mnt; net for net none, for egress-allowlist "
                "with the agent's proxy as its only listener, and for egress-any with slirp4netns and an nftables "
                "ruleset"},
        {"devices", "a devpts instance (/dev/pts, /dev/ptmx) and a /dev/shm tmpfs of the job's own (default " +
                        std::to_string(kDefaultShmBytes >> 20) +
                        " MiB, pages charged to its cgroup leaf); never the host's or another job's"}}},
      {"net_egress_any", {{"status", StatusName(egress_any.status)}, {"detail", egress_any.detail}}},
      {"verification",
       "read from /proc/<pid>/ before exec: NoNewPrivs 1, Seccomp 2, Seccomp_filters >= 1, CapEff/CapPrm/CapInh/CapAmb "
       "0, the cgroup leaf, fresh namespaces, writable grants mounted noexec, read_only carve-outs mounted ro, a root job's /etc idmapped; Landlock leaves no trace there"},
      {"process_container",
       {{"process_group", "always (setsid)"},
        {"pid_namespace", host.user_namespaces && ns.ok},
        {"cgroup_leaf", d.usable},
        {"cgroup_detail", d.detail},
        {"memory_max", limit(CapabilityId::kLimitsMemory)},
        {"cpu_max", limit(CapabilityId::kLimitsCpu)},
        {"pids_max",
         {{"status", d.usable && d.pids ? "enforced" : "unavailable"},
          {"detail", d.usable && d.pids ? "limits.pids (default " + std::to_string(kDefaultPidsMax) +
                                              ") as pids.max in each job's leaf"
                                        : "no pids controller delegated: " + d.detail}}}}},
  };
}

}  // namespace oarbank::cage
