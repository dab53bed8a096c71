#include "sandbox/supervise/job_state.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/job_processes.h"
#include "sandbox/supervise/verify.h"

namespace oarbank::cage {
namespace {

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
    const timespec zero{};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return w;
}

// The job's terminal takes the caller's window size (24x80 when the caller
// has no terminal); true when it changed.
bool CopyWindowSize(int terminal, int pty, winsize& last) {
  winsize now{};
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

std::string ErrnoText(int err) { return err == 0 ? std::string() : std::string(": ") + strerror(err); }

void Capture::Take(const char* buf, size_t n) {
  const uint64_t room = max - std::min<uint64_t>(max, kept);
  const size_t keep = static_cast<size_t>(std::min<uint64_t>(room, n));
  if (spool >= 0) {
    for (size_t done = 0; spool_err == 0 && done < keep;) {
      const ssize_t w = write(spool, buf + done, keep - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        spool_err = w < 0 ? errno : EIO;
      else
        done += static_cast<size_t>(w);
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

void Outbox::Flush() {
  const ssize_t w = WriteNoSigpipe(fd, pending.data(), std::min<size_t>(pending.size(), PIPE_BUF));
  if (w > 0) {
    pending.erase(0, static_cast<size_t>(w));
  } else if (w < 0 && errno != EINTR && errno != EAGAIN) {
    failed = true;
    pending.clear();
  }
}

void Job::State::PublishNetns() {
  if (publish_netns.empty()) return;
  const std::string target = "/proc/" + std::to_string(init) + "/ns/net";
  if (symlink(target.c_str(), publish_netns.c_str()) != 0)
    return Refuse("publish-netns: " + publish_netns + ErrnoText(errno));
  published = true;
}

void Job::State::UnpublishNetns() {
  if (!published) return;
  char buf[64] = {};
  const std::string target = "/proc/" + std::to_string(init) + "/ns/net";
  if (readlink(publish_netns.c_str(), buf, sizeof buf - 1) > 0 && target == buf) unlink(publish_netns.c_str());
  published = false;
}

void Job::State::OnJobNetwork() {
  char c = 0;
  const ssize_t n = recv(net.get(), &c, 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n != 1 || c != 'N') return net.Reset();  // init ended; the status pipe says why
  while (init <= 0 && status.valid() && !aborted) AwaitStatus();
  if (init <= 0) return Refuse("network: the job's init never reported");
  FaultPause("supervisor-before-job-network", keeper, init);
  if (!network) return Refuse("network: the job's network was not prepared");
  if (auto e = network->Start(init, network_settings, start + kSetupDeadline)) return RefuseJobNetwork(*e);
  if (send(net.get(), "G", 1, MSG_NOSIGNAL) != 1) return Refuse("network: release init" + ErrnoText(errno));
  net.Reset();
}

void Job::State::PrepareJobNetwork() {
  auto prepared = JobNetwork::Prepare();
  if (!prepared.ok()) return RefuseJobNetwork(prepared.error());
  network = std::move(prepared).value();
}

void Job::State::RefuseJobNetwork(const Error& e) {
  Refuse("sandbox: CAPABILITY_NOT_ENFORCED: net.egress-any (" + e.where + ": " + e.what + ")");
}

void Job::State::StopNetwork() {
  if (!network) return;
  result.container.net_dropped = network->End();
  network.reset();
}

void Job::State::StopProxy() {
  if (!proxy) return;
  proxy->Stop();
  proxy.reset();
}

void Job::State::ServeEgress() {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kSetupDeadline - Clock::now());
  auto listener = ReceiveListenerFromChild(egress.get(), left);
  egress.Reset();
  if (!listener.ok()) return Refuse(listener.error().where + ": " + listener.error().what);
  auto served = ServeJobEgress(egress_allow, listener.value(), egress_options);
  if (!served.ok()) return Refuse("egress: the job's proxy: " + served.error().where + ": " + served.error().what);
  proxy = std::move(served).value();
}

void Job::State::Refuse(const std::string& reason) {
  Abort();
  if (result.fault != Fault::kNone) return;  // the first fault wins (a timeout during setup stays one)
  result.fault = Fault::kRefused;
  result.reason = reason;
}

void Job::State::Abort() {
  if (aborted || keeper <= 0) return;
  aborted = true;
  kill(keeper, SIGTERM);
  if (leaf) leaf->Kill();
}

void Job::State::OnTracerEnded() {
  tracer_ended = true;
  // The keeper ends before its tracer can: one that has not is still the
  // job's, now untraced, and is ended as PTRACE_O_EXITKILL would.
  siginfo_t info{};
  const bool keeper_gone =
      keeper <= 0 || (waitid(P_PID, keeper, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == keeper);
  if (keeper_gone) return;
  trace->failure = "the tracer ended before the job, which was killed";
  Abort();
}

void Job::State::OnStatus() {
  StatusRecord r{};
  const ssize_t n = read(status.get(), &r, sizeof r);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n != static_cast<ssize_t>(sizeof r)) {
    status.Reset();  // EOF: keeper and init are both gone
    return;
  }
  switch (r.kind) {
    case Record::kInitPid:
      init = r.value;
      OnInitReported();
      break;
    case Record::kSetupFailed: Refuse(std::string(r.stage) + ": " + r.detail + ErrnoText(r.err)); break;
    case Record::kModuleExit:
      module_exited = true;
      module_status = r.value;
      break;
    case Record::kClosed:
      closed = true;
      oom_kills = r.value;
      if (r.err != 0 && leaf) result.container.cgroup_detail += "; removing the leaf failed" + ErrnoText(r.err);
      break;
  }
}

void Job::State::AwaitStatus() {
  pollfd p{status.get(), POLLIN, 0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(start + kSetupDeadline - Clock::now());
  if (poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count()))) == 0)
    return Refuse("setup took longer than 60 s");
  OnStatus();
}

void Job::State::OnInitReported() {
  // The keeper made the leaf before it cloned init.
  if (leaf) {
    leaf->ReadFeatures();
    result.container.cgroup_detail =
        std::string("leaf with ") + (leaf->has_kill() ? "cgroup.kill" : "no cgroup.kill (Linux < 5.14)") +
        (leaf->has_freeze() ? ", cgroup.freeze" : "") + ", limits " + result.container.limits;
  }
  OwnNamespaces();
}

void Job::State::Verify(pid_t launcher) {
  // init's pid was sent before init was released, so it is in the pipe.
  while (init <= 0 && status.valid() && !aborted) AwaitStatus();
  if (init <= 0) return Refuse("gate: the job's init never reported");
  FaultPause("supervisor-init-reported", keeper, init);
  const GateCheck check = VerifyConfined(launcher, init, gate_wants);
  result.container.verified = check.reading;
  if (!check.ok) return Refuse("gate: the launcher is not confined: " + check.reason);
  if (want_pty && !pty.valid()) return Refuse("terminal: the launcher did not hand over the job's terminal");
  if (job_network) {
    const std::string why = network ? network->Verify() : "not set up";
    if (!why.empty()) return Refuse("gate: the job's network: " + why);
  }
  if (egress.valid()) {
    ServeEgress();
    if (aborted) return;
  }
  PublishNetns();
  if (aborted) return;
  if (send(gate.get(), &kGateGo, 1, MSG_NOSIGNAL) != 1) return Refuse("gate: release" + ErrnoText(errno));
  phase = Phase::kAwaitExec;
}

void Job::State::OnGate() {
  GateFailure failure;
  char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))];
  iovec iov{&failure, sizeof failure};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(gate.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    // EOF. Before the gate: the launcher died. After it: exec succeeded
    // (the socket is close-on-exec).
    gate.Reset();
    if (phase == Phase::kAwaitReady) {
      // A setup failure the keeper or init reported explains it better.
      while (status.valid() && !module_exited && result.fault == Fault::kNone) AwaitStatus();
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
  if (tag == kGateTerminal && n == 1 && passed >= 0 && want_pty && !pty.valid() && phase == Phase::kAwaitReady) {
    pty.Reset(passed);
    fcntl(pty.get(), F_SETFL, fcntl(pty.get(), F_GETFL) | O_NONBLOCK);
    CopyWindowSize(terminal, pty.get(), window);
    next_window_check = Clock::now() + kWindowPoll;
    to_job.fd = pty.get();
    return;
  }
  if (passed >= 0) close(passed);
  if (tag == kGateFailed && n == static_cast<ssize_t>(sizeof failure)) {
    const std::string what = std::string(failure.stage) + ": " + failure.detail + ErrnoText(failure.err);
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

void Job::State::OnOutput(UniqueFd& fd, Capture& cap, Outbox& stream) {
  char buf[65536];
  const ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    fd.Reset();
    return;
  }
  cap.Take(buf, static_cast<size_t>(n));
  stream.Add(buf, static_cast<size_t>(n));
}

void Job::State::OnInput() {
  char buf[4096];
  const ssize_t n = read(in_src, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) return to_job.Add(buf, static_cast<size_t>(n));
  in_src = -1;
  // The master's own settings do not hold the job's EOF character: ^D,
  // the default, which a terminal in canonical mode reads as EOF.
  if (pty.valid()) to_job.Add("\x04", 1);
  OnJobInputWritable();
}

void Job::State::OnJobInputWritable() {
  if (to_job.Busy()) to_job.Flush();
  // Nobody reads it any more, or everything arrived: the job sees EOF.
  if (stdin_w.valid() && (to_job.failed || (in_src < 0 && to_job.pending.empty()))) {
    stdin_w.Reset();
    to_job.fd = -1;
  }
}

Job::State::PollSet Job::State::Wanted() const {
  PollSet set;
  auto want = [&](int fd, short what, PumpEvent e) {
    if (fd < 0) return;
    set.fds[set.n] = {fd, what, 0};
    set.events[set.n++] = e;
  };
  want(gate.get(), POLLIN, PumpEvent::kGate);
  want(status.get(), POLLIN, PumpEvent::kStatus);
  want(net.get(), POLLIN, PumpEvent::kNet);  // egress-any's job network (job_network.h)
  if (tracer && !tracer_ended) want(tracer->pidfd(), POLLIN, PumpEvent::kTracer);
  // A stream the caller is slow to take holds its source back.
  if (!out_stream.Busy()) {
    want(out.get(), POLLIN, PumpEvent::kOut);
    want(pty.get(), POLLIN, PumpEvent::kPty);
  }
  if (!err_stream.Busy()) want(err.get(), POLLIN, PumpEvent::kErr);
  if (to_job.fd >= 0 && !to_job.failed && to_job.pending.empty()) want(in_src, POLLIN, PumpEvent::kIn);
  if (to_job.Busy()) want(to_job.fd, POLLOUT, PumpEvent::kToJob);
  if (out_stream.Busy()) want(out_stream.fd, POLLOUT, PumpEvent::kOutStream);
  if (err_stream.Busy()) want(err_stream.fd, POLLOUT, PumpEvent::kErrStream);
  return set;
}

bool Job::State::InSetup() const { return phase == Phase::kAwaitReady || phase == Phase::kAwaitExec; }

int Job::State::WaitMs(Clock::time_point now) const {
  int wait_ms = -1;
  auto consider = [&](Clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
    wait_ms = wait_ms < 0 ? static_cast<int>(std::max<long long>(0, ms))
                          : std::min(wait_ms, static_cast<int>(std::max<long long>(0, ms)));
  };
  if (InSetup() && !aborted) consider(start + kSetupDeadline);
  if (deadline && !aborted) consider(*deadline);
  if (pty.valid() && terminal >= 0) consider(next_window_check);
  return wait_ms;
}

void Job::State::OnTimers(bool was_in_setup, Clock::time_point now) {
  if (was_in_setup && !aborted && now >= start + kSetupDeadline) Refuse("setup took longer than 60 s");
  if (deadline && !aborted && now >= *deadline && result.fault == Fault::kNone) {
    result.fault = Fault::kTimeout;
    char text[64];
    snprintf(text, sizeof text, "killed at the timeout of %.3g s",
             std::chrono::duration<double>(*deadline - start).count());
    result.reason = text;
    Abort();
  }
  if (pty.valid() && terminal >= 0 && now >= next_window_check) {
    CopyWindowSize(terminal, pty.get(), window);
    next_window_check = now + kWindowPoll;
  }
}

void Job::State::Dispatch(PumpEvent event) {
  switch (event) {
    case PumpEvent::kGate: OnGate(); break;
    case PumpEvent::kStatus: OnStatus(); break;
    case PumpEvent::kNet: OnJobNetwork(); break;
    case PumpEvent::kOut: OnOutput(out, out_cap, out_stream); break;
    case PumpEvent::kErr: OnOutput(err, err_cap, err_stream); break;
    case PumpEvent::kPty:
      // The pty is also the job's stdin: it goes with its output.
      OnOutput(pty, out_cap, out_stream);
      if (!pty.valid()) to_job.fd = -1;
      break;
    case PumpEvent::kIn: OnInput(); break;
    case PumpEvent::kToJob: OnJobInputWritable(); break;
    case PumpEvent::kOutStream: out_stream.Flush(); break;
    case PumpEvent::kErrStream: err_stream.Flush(); break;
    case PumpEvent::kTracer: OnTracerEnded(); break;
  }
}

void Job::State::Pump(const std::function<bool()>& done) {
  while (!done() && (gate.valid() || status.valid() || out.valid() || err.valid() || pty.valid() || out_stream.Busy() ||
                     err_stream.Busy())) {
    PollSet set = Wanted();
    const bool was_in_setup = InSetup();
    const int ready = poll(set.fds, set.n, WaitMs(Clock::now()));
    if (ready < 0 && errno != EINTR) {
      Refuse(std::string("poll") + ErrnoText(errno));
      break;
    }
    OnTimers(was_in_setup, Clock::now());
    for (nfds_t i = 0; ready > 0 && i < set.n; ++i)
      if (set.fds[i].revents != 0) Dispatch(set.events[i]);
  }
}

const Result& Job::State::Finish() {
  if (phase == Phase::kDone) return result;
  Pump([] { return false; });
  if (keeper > 0) {
    while (waitpid(keeper, nullptr, __WALL) < 0 && errno == EINTR) {
    }
    keeper = -1;
  }
  if (tracer) {
    const std::string cut = tracer->Finish(std::chrono::seconds(10));
    if (!cut.empty()) trace->failure += (trace->failure.empty() ? "" : ": ") + cut;
    tracer.reset();
  }
  // Nothing of the job is left to connect to the proxy.
  StopProxy();
  egress.Reset();
  net.Reset();
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
      result.spool_error +=
          std::string(result.spool_error.empty() ? "" : "; ") + name + " spool file: write" + ErrnoText(cap->spool_err);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  phase = Phase::kDone;
  return result;
}

}  // namespace oarbank::cage
