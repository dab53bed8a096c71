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
#include "sandbox/supervise/job_processes.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/plan/plan.h"
#include "sandbox/common/text_encoding.h"

namespace oarbank::cage {
namespace {

using Clock = std::chrono::steady_clock;

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

namespace {

// Ends a job before anything was spawned: refused, with `reason`.
void RefuseBeforeSpawn(Job::State& s, const std::string& reason) {
  s.result.refused = true;
  s.result.fault = Fault::kRefused;
  s.result.reason = reason;
  s.result.seconds = std::chrono::duration<double>(Clock::now() - s.start).count();
  s.phase = Phase::kDone;
}

// The caps, streams and terminal the options ask for.
void TakeOptions(Job::State& s, const RunOptions& options) {
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
}

// The host as the job meets it, or why no job can run here: the Landlock
// floor, user namespaces, run_as.
Expected<HostFacts> ProbeJobHost(const Policy& policy, const RunOptions& options) {
  HostFacts host = ProbeHost(options.landlock_abi_cap);
  host.job_network = SupervisedJobNetworkFacts(policy.net().mode == NetMode::kEgressAny);
  ProbeRootEtc(host);
  host.etc_view.proof_tree.reset();  // the keeper makes each job's copy (MakeRootEtcTree)
  const int floor = std::max(1, options.abi_floor);
  if (host.landlock_abi < floor)
    return Error{"", "abi_floor: this host's Landlock ABI is " + std::to_string(host.landlock_abi) +
                         ", below the floor " + std::to_string(floor)};
  // No quiet fallback: without user namespaces there is no job.
  if (!host.user_namespaces)
    return Error{"", "namespaces: user namespaces are refused here: " + host.user_namespaces_detail};
  if ((options.run_as_uid || options.run_as_gid) && geteuid() != 0) return Error{"", "run_as: needs a root supervisor"};
  return host;
}

// The plan, with the job's own devices, if the policy can be placed here
// and the battery proved its class (cage-before-capability).
Expected<Plan> PlanJob(const Policy& policy, const HostFacts& host, const RunOptions& options, Container& box) {
  Plan plan = PlanConfinement(policy, host);
  if (plan.placement.verdict != Verdict::kOk) return Error{"", PlacementLine(plan.placement)};
  if (options.shm_max < 4096) return Error{"", "shm_max: /dev/shm needs at least 4096 bytes"};
  PlanJobDevices(plan, options.shm_max);
  auto proof = CheckProof(policy, host, options);
  if (!proof.ok()) return Error{"", proof.error().what};
  box.proof = proof.value();
  return plan;
}

// What the gate will check from outside: fresh namespaces, noexec and
// read-only mounts, root's idmapped /etc.
void ExpectAtTheGate(Job::State& s, const Plan& plan, const NamespacePlan& ns, const RunOptions& options) {
  Container& box = s.result.container;
  box.namespaces = ns.Names();
  box.net = ns.net_detail;
  s.fresh = {"user", "pid", "ipc", "uts", "mnt"};
  if (ns.net) s.fresh.push_back("net");
  if (plan.writable_noexec) s.noexec = plan.writable_binds;
  s.read_only = plan.read_only_binds;
  s.root_etc_idmapped = plan.root_etc_idmap_fd >= 0 && !options.run_as_uid;
}

// The process container's cgroup leaf, where the agent's cgroup is
// delegated, named here and made by the keeper (KeeperMain); or why the
// policy's limits cannot be enforced.
std::optional<std::string> PrepareLeaf(Job::State& s, const Policy& policy, const HostFacts& host,
                                       const RunOptions& options) {
  Container& box = s.result.container;
  const CgroupDelegation delegation = DetectCgroupDelegation(host.cgroup);
  const LeafLimits limits = PlanLeafLimits(policy.limits(), options.hard_limits, delegation.usable && delegation.pids);
  box.limits = DescribeLeafLimits(limits);
  for (const auto& [needed, id] : {std::pair{limits.needs_memory(), CapabilityId::kLimitsMemory},
                                   {limits.needs_cpu(), CapabilityId::kLimitsCpu}}) {
    if (!needed) continue;
    const CapabilityStatus status = Assess(id, host);
    if (status.status != Status::kEnforced)
      return std::string("sandbox: CAPABILITY_NOT_ENFORCED: ") + CapabilityName(id) + " (" + status.detail + ")";
  }
  box.cgroup_detail = delegation.detail;
  if (!delegation.usable) return std::nullopt;
  std::call_once(g_collect_once, [&] { CollectStaleLeaves(delegation.base); });
  auto leaf = CgroupLeaf::Prepare(delegation, limits);
  if (!leaf.ok()) return leaf.error().where + ": " + leaf.error().what;
  s.leaf = std::move(leaf).value();
  box.cgroup = s.leaf->path();
  s.cgroup_line = CgroupProcLine(host.cgroup, s.leaf->path());
  return std::nullopt;
}

// The strings ChildPlan's argv and envp point into: they outlive the fork.
struct ChildStrings {
  std::vector<std::string> args, env;
};

// Everything the job's processes need, built now: after the fork they
// allocate nothing. The broker grant (broker_handoff.h): below Landlock
// ABI 9 the job holds one connection, made here in the agent's namespaces
// (`broker`, the job's kJobBrokerFd).
std::optional<std::string> PrepareChild(ChildPlan& cp, ChildStrings& strings, UniqueFd& broker, Job::State& s,
                                        const Plan& plan, const NamespacePlan& ns, const Policy& policy,
                                        const std::vector<std::string>& argv, const RunOptions& options) {
  cp.plan = &plan;
  cp.clone_flags = ns.clone_flags;
  cp.maps = PlanIdMaps(geteuid(), getegid(), options.run_as_uid, options.run_as_gid);
  cp.leaf = s.leaf ? &*s.leaf : nullptr;
  strings.args = argv;
  for (auto& a : strings.args) cp.argv.push_back(a.data());
  cp.argv.push_back(nullptr);
  std::map<std::string, std::string> named_env = options.env;
  if (plan.broker == BrokerHandoff::kInheritedFd) {
    auto connected = ConnectBroker(*policy.broker());
    if (!connected.ok()) return connected.error().where + ": " + connected.error().what;
    broker.Reset(connected.value());
  }
  if (plan.broker != BrokerHandoff::kNone)
    named_env["OARBANK_BROKER"] = BrokerEnvironmentValue(plan.broker, *policy.broker(), kJobBrokerFd);
  strings.env = BuildModuleEnvironment(policy, named_env);
  for (auto& e : strings.env) cp.envp.push_back(e.data());
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
  cp.pty = options.pty;
  s.publish_netns = options.publish_netns;
  if (ns.job_network) {
    s.job_network = true;
    if (options.egress) s.network_settings.test_public = options.egress->test_public;
  }
  if (ns.egress_listener) {
    cp.egress_port = policy.net().proxy_port;
    s.egress_allow = policy.net().allow;
    if (options.egress) s.egress_options = *options.egress;
  }
  return std::nullopt;
}

// The channels between the supervisor and the job's processes, each end
// owned until it is handed over: a failure anywhere closes every one.
struct JobChannels {
  // The job's ends, closed in the supervisor right after the fork.
  UniqueFd devnull, status_w, out_w, err_w, sync_r, sync_w, gate_child, egress_child, net_child, stdin_r, broker;
  // The supervisor's ends, handed to the job's state.
  UniqueFd status, out, err, gate, egress, net, stdin_w;

  // The numbers the job's processes use (the numbers survive the forks).
  JobFds ChildFds() const {
    JobFds f;
    f.devnull = devnull.get();
    f.status_w = status_w.get();
    f.out_w = out_w.get();
    f.err_w = err_w.get();
    f.sync_r = sync_r.get();
    f.sync_w = sync_w.get();
    f.gate_child = gate_child.get();
    f.egress_child = egress_child.get();
    f.net_child = net_child.get();
    f.stdin_r = stdin_r.get();
    f.broker = broker.get();
    return f;
  }
  void CloseChildEnds() {
    for (UniqueFd* fd : {&devnull, &status_w, &out_w, &err_w, &sync_r, &sync_w, &gate_child, &egress_child,
                         &net_child, &stdin_r, &broker})
      fd->Reset();
  }
};

int Pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errno;
  read_end.Reset(p[0]);
  write_end.Reset(p[1]);
  return 0;
}

int SeqPacketPair(UniqueFd& mine, UniqueFd& theirs) {
  int p[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0) return errno;
  mine.Reset(p[0]);
  theirs.Reset(p[1]);
  return 0;
}

// Opens every channel the job needs; 0 or the errno of the first that
// failed (what was opened closes with `c`). The caller's input goes to the
// job through a pipe of its own (or the terminal): the job never holds the
// caller's fd, a terminal least of all.
int OpenChannels(JobChannels& c, const NamespacePlan& ns, bool stdin_relay) {
  const int one = 1;
  c.devnull.Reset(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!c.devnull.valid()) return errno;
  if (int err = Pipe(c.status, c.status_w)) return err;
  if (int err = Pipe(c.out, c.out_w)) return err;
  if (int err = Pipe(c.err, c.err_w)) return err;
  if (int err = Pipe(c.sync_r, c.sync_w)) return err;
  if (int err = SeqPacketPair(c.gate, c.gate_child)) return err;
  if (setsockopt(c.gate.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) return errno;
  if (ns.egress_listener)
    if (int err = SeqPacketPair(c.egress, c.egress_child)) return err;
  if (ns.job_network)
    if (int err = SeqPacketPair(c.net, c.net_child)) return err;
  if (stdin_relay)
    if (int err = Pipe(c.stdin_r, c.stdin_w)) return err;
  return 0;
}

// The supervisor's ends go to the job's state, which closes them; poll
// says when to read, and a read never blocks the supervisor (the module
// could not drain its output while it did).
void HandOver(Job::State& s, JobChannels& c, const RunOptions& options, bool stdin_relay) {
  s.status = c.status.Release();
  s.out = c.out.Release();
  s.err = c.err.Release();
  s.gate = c.gate.Release();
  s.egress = c.egress.Release();
  s.net = c.net.Release();
  s.stdin_w = c.stdin_w.Release();
  s.to_job.fd = s.stdin_w;  // the pty, once the launcher sends it
  s.in_src = options.stdin_fd >= 0 && (stdin_relay || options.pty) ? options.stdin_fd : -1;
  if (s.stdin_w >= 0) fcntl(s.stdin_w, F_SETFL, fcntl(s.stdin_w, F_GETFL) | O_NONBLOCK);
  for (int fd : {s.status, s.out, s.err}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Forks the keeper, closes the job's ends here, and pumps up to the exec
// (or the refusal): the gate is verified in there.
void Launch(Job::State& s, const ChildPlan& cp, JobChannels& c) {
  const JobFds f = c.ChildFds();
  FaultPause("supervisor-before-keeper");
  s.keeper = fork();
  if (s.keeper == 0) KeeperMain(cp, f);
  const int fork_err = errno;
  FaultPause("supervisor-after-keeper", s.keeper);
  c.CloseChildEnds();
  if (s.keeper < 0) {
    s.keeper = -1;
    s.Refuse("job-setup: fork" + ErrnoText(fork_err));
    s.Finish();
    return;
  }
  s.Pump([&s] { return s.phase != Phase::kAwaitReady && s.phase != Phase::kAwaitExec; });
  if (s.result.fault == Fault::kRefused || s.phase == Phase::kAwaitReady || s.phase == Phase::kAwaitExec) {
    if (s.result.fault != Fault::kRefused) s.Refuse("gate: the job ended during setup");
    s.Finish();
  }
}

}  // namespace

Job Start(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options) {
  auto state = std::make_unique<Job::State>();
  Job::State& s = *state;
  auto refuse = [&](const std::string& reason) {
    RefuseBeforeSpawn(s, reason);
    return Job(std::move(state));
  };
  TakeOptions(s, options);
  if (argv.empty()) return refuse("argv: empty");
  auto host = ProbeJobHost(policy, options);
  if (!host.ok()) return refuse(host.error().what);
  auto plan = PlanJob(policy, host.value(), options, s.result.container);
  if (!plan.ok()) return refuse(plan.error().what);
  const NamespacePlan ns = PlanJobNamespaces(policy);
  ExpectAtTheGate(s, plan.value(), ns, options);
  if (auto why = PrepareLeaf(s, policy, host.value(), options)) return refuse(*why);

  // From here a failure removes the leaf it named.
  auto refuse_after_leaf = [&](const std::string& reason) {
    if (s.leaf) s.leaf->Remove();
    return refuse(reason);
  };
  ChildPlan cp;
  ChildStrings strings;
  JobChannels channels;
  if (auto why = PrepareChild(cp, strings, channels.broker, s, plan.value(), ns, policy, argv, options))
    return refuse_after_leaf(*why);
  const bool stdin_relay = options.stdin_fd >= 0 && !options.pty;
  if (int err = OpenChannels(channels, ns, stdin_relay)) return refuse_after_leaf("job-setup: pipes" + ErrnoText(err));
  HandOver(s, channels, options, stdin_relay);
  Launch(s, cp, channels);
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
