#include "sandbox/common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxMoves = 16;    // stdin, stdout, stderr and the caller's extras
constexpr int kExitPollMs = 20;  // how often an exit is looked for where pidfd_open is missing

// What the child needs, prepared before vfork: it shares the caller's memory
// until it execs and so may not allocate.
struct ChildSetup {
  std::vector<char*> argv, envp;
  int moves[kMaxMoves][2];  // {fd here, number in the child}
  int n_moves = 0;
  int highest = 2;
  const SubprocessSpec* spec = nullptr;
};

// Each source first above every target, then down into place (a source may
// be another's target); then every other descriptor closed, unless kept.
bool MoveDescriptors(const ChildSetup& c) {
  int high[kMaxMoves];
  for (int i = 0; i < c.n_moves; ++i)
    if ((high[i] = fcntl(c.moves[i][0], F_DUPFD_CLOEXEC, c.highest + 1)) < 0) return false;
  // Below the highest target, what is no target is the caller's: closed.
  if (!c.spec->inherit_fds)
    for (int fd = 3; fd < c.highest; ++fd) {
      bool target = false;
      for (int i = 0; i < c.n_moves; ++i) target = target || c.moves[i][1] == fd;
      if (!target) close(fd);
    }
  for (int i = 0; i < c.n_moves; ++i)
    if (dup2(high[i], c.moves[i][1]) != c.moves[i][1]) return false;
  if (c.spec->inherit_fds) {
    for (int i = 0; i < c.n_moves; ++i) close(high[i]);
  } else {
    syscall(SYS_close_range, static_cast<unsigned>(c.highest + 1), ~0u, 0);
  }
  return true;
}

// The vfork child: system calls only, until exec.
[[noreturn]] void ChildMain(const ChildSetup& c) {
  const SubprocessSpec& spec = *c.spec;
  // Handlers are the caller's code: none may run here. Every signal back to
  // its default; the mask (all blocked around vfork) is cleared last.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  if (spec.new_process_group && setpgid(0, 0) != 0) _exit(127);
  if (spec.die_with_caller && prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(127);
  for (const auto& [fd, type] : spec.namespaces)
    if (setns(fd, type) != 0) _exit(127);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(127);
  if (!MoveDescriptors(c)) _exit(127);
  if (spec.uid) {
    const uid_t id = *spec.uid;
    if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, id, id, id) != 0 ||
        syscall(SYS_setresuid, id, id, id) != 0)
      _exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(c.argv[0], c.argv.data(), c.envp.data());
  _exit(127);
}

// Reaps `pid`, which has exited. With its own group, whatever is left in
// the group is killed first, while the exited leader (not yet reaped)
// still holds the group's number.
int Reap(pid_t pid, bool group) {
  siginfo_t info{};
  if (group) {
    while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
    kill(-pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

int KillAndReap(pid_t pid, bool group) {
  kill(group ? -pid : pid, SIGKILL);
  return Reap(pid, group);
}

bool Exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

int MillisLeft(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

// The descriptors one run watches.
struct Watch {
  UniqueFd to;          // its stdin, while `input` is being written
  UniqueFd outputs[2];  // its stdout and stderr, while captured and open
  UniqueFd pidfd;       // readable once it has exited (Linux 5.3), or -1
  size_t written = 0;
  bool exited = false;
};

// Reads `outputs[s]` once: false when it has closed.
bool ReadOutput(Watch& w, int s, const CaptureLimits& limits, CapturedRun& c) {
  char buf[16384];
  const ssize_t r = read(w.outputs[s].get(), buf, sizeof buf);
  if (r < 0) return errno == EAGAIN || errno == EINTR;
  if (r == 0) return false;
  const std::string_view chunk(buf, static_cast<size_t>(r));
  if (limits.on_output) limits.on_output(s, chunk);
  std::string& text = s == 0 ? c.out : c.err;
  if (text.size() < limits.max_bytes) text.append(chunk.substr(0, limits.max_bytes - text.size()));
  return true;
}

// Writes, reads and waits until both outputs have closed and it has exited,
// the deadline passes or the hang-up descriptor hangs up.
void Pump(pid_t pid, Watch& w, const SubprocessSpec& spec, const CaptureLimits& limits, CapturedRun& c) {
  while (w.outputs[0].valid() || w.outputs[1].valid() || !w.exited) {
    pollfd p[5];
    int slot[5];  // 0, 1: outputs; 2: stdin; 3: hang-up; 4: pidfd
    int n = 0;
    for (int s = 0; s < 2; ++s)
      if (w.outputs[s].valid()) slot[n] = s, p[n++] = {w.outputs[s].get(), POLLIN, 0};
    if (w.to.valid()) slot[n] = 2, p[n++] = {w.to.get(), POLLOUT, 0};
    if (limits.hangup_fd >= 0) slot[n] = 3, p[n++] = {limits.hangup_fd, 0, 0};
    if (!w.exited && w.pidfd.valid()) slot[n] = 4, p[n++] = {w.pidfd.get(), POLLIN, 0};
    const int left = MillisLeft(limits.deadline);
    if (left == 0) {
      c.timed_out = true;
      return;
    }
    const bool look = !w.exited && !w.pidfd.valid();  // no pidfd: look now and then
    const int ready = poll(p, static_cast<nfds_t>(n), look ? std::min(left, kExitPollMs) : left);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      c.hung_up = true;  // nothing more can be watched: it is ended
      return;
    }
    if (look) w.exited = Exited(pid);
    for (int i = 0; i < n; ++i) {
      if (!p[i].revents) continue;
      switch (slot[i]) {
        case 0:
        case 1:
          if (!ReadOutput(w, slot[i], limits, c)) w.outputs[slot[i]].Reset();
          break;
        case 2: {
          const ssize_t sent =
              send(w.to.get(), spec.input.data() + w.written, spec.input.size() - w.written, MSG_NOSIGNAL);
          if (sent > 0) w.written += static_cast<size_t>(sent);
          if ((sent < 0 && errno != EAGAIN && errno != EINTR) || w.written == spec.input.size()) w.to.Reset();
          break;
        }
        case 3:
          if (p[i].revents & (POLLHUP | POLLERR)) {
            c.hung_up = true;
            return;
          }
          break;
        case 4: w.exited = true; break;
      }
    }
  }
}

}  // namespace

int CapturedRun::ExitCode() const {
  if (!started || wait_status == -1) return -1;
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

CapturedRun RunCaptured(const SubprocessSpec& spec, const CaptureLimits& limits) {
  CapturedRun c;
  const auto start = Clock::now();
  auto fail = [&c](const char* what, int err) {
    c.error = std::string(what) + ": " + strerror(err);
    return c;
  };
  if (spec.argv.empty() || spec.fds.size() + 3 > kMaxMoves) return fail("argv", EINVAL);
  Watch w;
  UniqueFd child_ends[3];  // its stdin, stdout, stderr
  if (!spec.input.empty()) {
    int in[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return fail("socketpair", errno);
    w.to.Reset(in[0]);
    child_ends[0].Reset(in[1]);
  } else {
    child_ends[0].Reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!child_ends[0].valid()) return fail("/dev/null", errno);
  }
  for (int s = 0; s < 2; ++s) {
    if ((s == 0 ? spec.stdout_fd : spec.stderr_fd) >= 0) continue;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return fail("pipe", errno);
    w.outputs[s].Reset(fds[0]);
    child_ends[s + 1].Reset(fds[1]);
  }

  ChildSetup setup;
  setup.spec = &spec;
  for (const auto& a : spec.argv) setup.argv.push_back(const_cast<char*>(a.c_str()));
  setup.argv.push_back(nullptr);
  for (const auto& e : spec.env) setup.envp.push_back(const_cast<char*>(e.c_str()));
  setup.envp.push_back(nullptr);
  auto move = [&setup](int from, int number) {
    setup.moves[setup.n_moves][0] = from;
    setup.moves[setup.n_moves][1] = number;
    ++setup.n_moves;
    setup.highest = std::max(setup.highest, number);
  };
  move(child_ends[0].get(), 0);
  move(spec.stdout_fd >= 0 ? spec.stdout_fd : child_ends[1].get(), 1);
  move(spec.stderr_fd >= 0 ? spec.stderr_fd : child_ends[2].get(), 2);
  for (const auto& [from, number] : spec.fds) move(from, number);

  sigset_t all, caller_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &caller_mask);
  const pid_t pid = vfork();
  if (pid == 0) ChildMain(setup);
  const int vfork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  for (auto& end : child_ends) end.Reset();
  if (pid < 0) return fail("vfork", vfork_errno);
  c.started = true;
  w.pidfd.Reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  for (UniqueFd* fd : {&w.to, &w.outputs[0], &w.outputs[1]})
    if (fd->valid()) fcntl(fd->get(), F_SETFL, fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  if (limits.on_start) limits.on_start(pid);
  Pump(pid, w, spec, limits, c);
  if (c.timed_out || c.hung_up)
    c.wait_status = limits.end ? limits.end(pid) : KillAndReap(pid, spec.new_process_group);
  else
    c.wait_status = Reap(pid, spec.new_process_group);
  c.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return c;
}

}  // namespace oarbank
