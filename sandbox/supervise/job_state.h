// The supervisor's state of one job (Job::State): its processes, the
// channels to them, what the gate checks, the captured output and the
// streams to the caller, the egress proxy and job network it serves, and
// the pump that drives them until the job is over. Internal to supervise/.
#pragma once

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/unique_fd.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/supervisor.h"
#include "sandbox/supervise/verify.h"

namespace oarbank::cage {

using Clock = std::chrono::steady_clock;

struct Capture {
  std::string data;
  size_t max = 0;
  int spool = -1;  // the caller's file for every kept byte; `data` keeps the first kSpoolWindow
  int spool_err = 0;
  uint64_t kept = 0;
  bool truncated = false;
  uint64_t dropped = 0;
  // Keeps what fits under the cap (spooling it where asked), counts the rest.
  void Take(const char* buf, size_t n);
};

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
  // Writes what the fd takes now, at most PIPE_BUF.
  void Flush();
};

// ": <strerror(err)>", or nothing for 0.
std::string ErrnoText(int err);

enum class Phase { kAwaitReady, kAwaitExec, kRunning, kDone };

struct Job::State {
  Result result;
  Clock::time_point start;
  std::optional<Clock::time_point> deadline;
  std::atomic<Phase> phase{Phase::kAwaitReady};  // Freeze and Thaw may read it from another thread
  pid_t keeper = -1;
  pid_t init = -1;
  // The supervisor's ends of the job's channels, each closed by its owner
  // however the job ends.
  UniqueFd gate;
  UniqueFd status;
  UniqueFd out;
  UniqueFd err;
  std::optional<CgroupLeaf> leaf;
  GateExpectations gate_wants;  // what the gate checks of the launcher (verify.h)
  Capture out_cap, err_cap;
  // Interactive use: the streams to the caller, the caller's input relayed
  // into the job (its stdin pipe, or the terminal), and the terminal.
  Outbox out_stream, err_stream;
  int in_src = -1;  // the caller's fd (not owned); -1 once it reached EOF
  Outbox to_job;    // into the stdin pipe (owned: stdin_w) or the pty
  UniqueFd stdin_w;
  bool want_pty = false;
  UniqueFd pty;       // the job's terminal's master, from the launcher
  int terminal = -1;  // the caller's terminal (not owned): window size
  winsize window{};
  Clock::time_point next_window_check;
  bool aborted = false;
  bool closed = false;  // the keeper reported the container closed
  long oom_kills = -1;
  bool module_exited = false;
  int module_status = 0;
  bool exec_failed = false;
  // egress-allowlist: the channel init sends the job's listener on, and the
  // proxy serving it until the job has ended (job_egress.h).
  UniqueFd egress;
  std::vector<std::string> egress_allow;
  JobEgressOptions egress_options;
  std::unique_ptr<egress::EgressProxy> proxy;
  // egress-any: init's channel, and the stack and ruleset of the job's
  // network namespace (job_network.h), stopped when the job has ended.
  UniqueFd net;
  bool job_network = false;
  JobNetworkSettings network_settings;
  std::unique_ptr<JobNetwork> network;
  // run --publish-netns: the symlink to the job's network namespace, made
  // at the gate and removed at the end.
  std::string publish_netns;
  bool published = false;

  // --explain (job_trace.h): what the caller gets back, and the tracer.
  std::shared_ptr<JobTrace> trace;
  std::optional<JobTracer> tracer;
  bool tracer_ended = false;
  // The tracer ended: before the job, it ends the job too.
  void OnTracerEnded();

  void PublishNetns();

  void UnpublishNetns();

  ~State() { StopProxy(); }

  // The keeper is forked: the job network's helper starts (JobNetwork::Prepare).
  void PrepareJobNetwork();
  // init's namespaces exist: rules, then the stack, then init may fork
  // the launcher.
  void OnJobNetwork();
  // Refuses the job: egress-any cannot be enforced, `e` says which part.
  void RefuseJobNetwork(const Error& e);

  // Packets dropped, then the stack stopped; after the job has ended.
  void StopNetwork();

  // Closes the listener and every proxied connection, joins its threads.
  void StopProxy();

  // Receives the listener init made in the job's network namespace and
  // serves it; the module is not released before this succeeded.
  void ServeEgress();

  void Refuse(const std::string& reason);

  // Kills the whole container: the keeper kills init (and with it the pid
  // namespace); the cgroup leaf is killed at once as well.
  void Abort();

  // Takes one record if there is one (the fd is non-blocking).
  void OnStatus();

  // Waits (bounded by the setup deadline) for the next status record.
  void AwaitStatus();

  // init is reported: the keeper has made the leaf and cloned the job, and
  // the launcher is still confining itself. What the gate needs that does
  // not depend on the launcher (the leaf's features, the supervisor's own
  // namespaces) is read now, off the path to the module's exec.
  void OnInitReported();

  void Verify(pid_t launcher);

  void OnGate();

  // The job's output: kept up to the cap, streamed whole. A terminal's
  // master reads EIO once nothing of the job holds the terminal: its end.
  void OnOutput(UniqueFd& fd, Capture& cap, Outbox& stream);

  // The caller's input, relayed while the job may take it. At EOF the stdin
  // pipe is closed once drained; a terminal gets its EOF character.
  void OnInput();

  void OnJobInputWritable();

  // Pumps events until `done()` or nothing of the job is left (and all of
  // its output has reached the caller's streams).
  void Pump(const std::function<bool()>& done);
  // Pump's stages: the fds to wait on and what each stands for, how long
  // to wait (the setup deadline, the timeout, the next window-size check),
  // the timers that came due, and the handler of one ready fd.
  enum class PumpEvent { kGate, kStatus, kNet, kOut, kErr, kPty, kIn, kToJob, kOutStream, kErrStream, kTracer };
  struct PollSet {
    pollfd fds[11];
    PumpEvent events[11];
    nfds_t n = 0;
  };
  PollSet Wanted() const;
  bool InSetup() const;
  int WaitMs(Clock::time_point now) const;
  void OnTimers(bool was_in_setup, Clock::time_point now);
  void Dispatch(PumpEvent event);

  // Runs the job to its end; the result stays in `result`.
  const Result& Finish();
};

}  // namespace oarbank::cage
