// `--explain`: a supervised job traced from outside its cage, so that each
// refusal can be explained afterwards (sandbox/explain/).
//
// The tracer is the supervisor's: it attaches to the keeper (the
// supervisor's child, in the host's namespaces) before the keeper makes the
// job's namespaces, and follows every process from there (but one the job
// makes with CLONE_UNTRACED, which the explanation then calls incomplete). It is never in
// the job's pid namespace (the job cannot see it, signal it or read its
// TracerPid: the job's /proc shows 0), never under the job's Landlock
// domain or seccomp filter, and the job's own ptrace stays refused (a
// traced process cannot be traced again: `--debug` with `--explain` is
// refused). The job runs confined exactly as without it: the tracer only
// watches.
//
// Attaching: the keeper allows the supervisor's descendants to trace it
// (PR_SET_PTRACER, for Yama), then waits on a pipe; the supervisor starts
// the tracer on the keeper's pid, waits until /proc/<keeper>/status names
// it as TracerPid, and only then lets the keeper go on. A tracer that does
// not attach refuses the job: an explanation asked for is never silently
// missing.
//
// A tracer that ends while the job runs (killed from outside) ends the job
// too, as PTRACE_O_EXITKILL would: the job never runs on untraced while the
// caller believes it is explained.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/plan/plan.h"

namespace oarbank::cage {

// What the caller asks for and what it gets back (JobHooks::trace).
struct JobTrace {
  // The tracer's command, to which "-p <keeper>" is appended (explain's
  // MergedStraceCommand, writing to kTracerLogFd).
  std::vector<std::string> command;
  // The caller's files with no name (O_TMPFILE: nothing can plant a link
  // where the tracer, which may be root, writes): its log, as kTracerLogFd,
  // and its stderr (why it did not attach).
  int log_fd = -1;
  int err_fd = -1;

  // Filled by the supervisor.
  Plan plan;                                // the job's confinement, as the launcher applied it
  std::string failure;                      // why the trace is incomplete; "" when whole
  std::mutex mu;                            // the proxy's threads add its refusals
  std::vector<std::string> proxy_refusals;  // the job's egress proxy's "egress_refused" lines
  size_t proxy_dropped = 0;                 // beyond kMaxProxyRefusals
};
inline constexpr size_t kMaxProxyRefusals = 200;
inline constexpr int kTracerLogFd = 3;
inline constexpr rlim_t kMaxTracerLog = rlim_t{1} << 30;  // RLIMIT_FSIZE of the tracer

class JobTracer {
 public:
  JobTracer() = default;
  JobTracer(JobTracer&& other) noexcept : pid_(std::exchange(other.pid_, -1)), pidfd_(std::move(other.pidfd_)) {}
  JobTracer& operator=(JobTracer&&) = delete;
  ~JobTracer();  // kills a tracer not finished

  // Starts `trace.command` on `keeper` and waits until it is attached.
  static Expected<JobTracer> Attach(const JobTrace& trace, pid_t keeper, std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }  // readable once the tracer has ended

  // Once the job has ended: waits for the tracer (it ends with its last
  // tracee), killing it past `timeout`. "" or why the logs are incomplete.
  std::string Finish(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
};

}  // namespace oarbank::cage
