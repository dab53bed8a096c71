// The supervisor: the agent's side of the cage, and the cage's C++ API
// (include/oarbank/cage.h): Available(), Run(Spec) ->
// Result, plus RunPolicy for a policy (policy/policy.h) with a timeout and output
// caps, and Start/Job for a job that is frozen or thawed while it runs.
//
// Every job is spawned the same way (process names say which runs what):
//
//   supervisor --fork--> keeper --clone(NEWUSER|NEWPID|NEWIPC|NEWUTS|NEWNS
//                                        [|NEWNET])--> init (pid 1)
//                                                      --fork--> launcher -> exec module
//
//   keeper    host namespaces. PR_SET_PDEATHSIG(SIGTERM) first: if the
//             supervisor dies (even by SIGKILL) it kills init. Then makes
//             the job's cgroup leaf (never the supervisor: a leaf made before
//             this process could outlive a supervisor killed in between),
//             writes the job's uid/gid maps, moves init into the leaf,
//             releases it, waits for it, then kills and removes the leaf and
//             reports.
//   init      pid 1 of the job: a fresh /proc, the hostname; for
//             egress-allowlist, `lo` up and the proxy listener, handed to
//             the supervisor (job_egress.h) before the launcher is forked;
//             then reaps.
//             PR_SET_PDEATHSIG(SIGKILL) on the keeper. When it exits the
//             kernel kills everything left in the pid namespace: a
//             double-forked setsid daemon included.
//   launcher  stdio (/dev/null, two pipes), default signals, setsid (a new
//             session, no controlling terminal), the built environment,
//             then the launcher's ordered steps (enforce.h) ending at the
//             gate. The supervisor verifies it from outside (verify.h) and
//             only then releases it to exec: no module instruction runs
//             before the check; anything else kills the container and the
//             result is `refused` with the reason.
//
// The launcher's steps run in the forked process rather than a re-exec of
// oarbank-agent: one exec fewer per job (the benchmark target is 4x a bare
// /bin/true), and the fork happens before any thread of the agent can hold
// a lock the child needs (glibc's fork keeps malloc usable).
//
// The supervisor may be multi-threaded when it forks (jobs started from
// several threads; each egress-allowlist job's proxy has its own threads),
// and another thread may hold any lock at that moment (the proxy's log holds
// stderr's). So after the fork keeper, init and launcher make system calls,
// format into stack buffers (snprintf) and take no lock, with one exception:
// libseccomp builds the filter in the launcher with malloc, which stays
// usable because glibc's fork() holds every malloc arena lock across the
// fork (a Landlock rule that fails also formats its port with std::to_string
// before the launcher exits).
//
// Caller obligations: the thread that starts a job must outlive it
// (PR_SET_PDEATHSIG follows the forking thread), and nothing else in the
// agent may reap the keeper (no waitpid(-1) elsewhere).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oarbank/cage.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_trace.h"
#include "sandbox/supervise/verify.h"

namespace oarbank {
struct JobEgressOptions;  // job_egress.h
}  // namespace oarbank

namespace oarbank::cage {

// Spec, Result, RunOptions, Availability, Run(Spec) and Available() are
// the installed API, in <oarbank/cage.h>, which must pull in nothing of the
// build tree (no Asio, no proxy): they are defined there.
Availability AssessAvailability(const HostFacts& host, bool namespaces_ok, const std::string& namespaces_detail);

// A running job. Move-only; Wait() to the end.
// What a job takes besides RunOptions from inside this repository alone:
// the hooks of the egress proxy the supervisor serves an egress-allowlist
// job (logging, the public test ranges, the test-only build's resolver
// file), whose type is not part of the installed API.
struct JobHooks {
  // Null: the system's resolver, a line on stderr per event.
  std::shared_ptr<const JobEgressOptions> egress;
  // --explain: the job is traced from outside its cage (job_trace.h) and
  // this is filled as it runs; null: not traced.
  std::shared_ptr<JobTrace> trace;
};

class Job {
 public:
  Job(Job&&) noexcept;
  Job& operator=(Job&&) noexcept;
  ~Job();  // kills the job if it was not waited for

  bool refused() const;
  // cgroup.freeze: "" or why not (no cgroup leaf here, or the kernel's errno).
  std::string Freeze();
  std::string Thaw();
  // Reads the output, enforces the timeout, and returns once nothing of the
  // job is left (the keeper has removed its cgroup leaf).
  Result Wait();

  struct State;

 private:
  explicit Job(std::unique_ptr<State> state);
  friend Job Start(const Policy&, const std::vector<std::string>&, const RunOptions&, const JobHooks&);
  std::unique_ptr<State> state_;
};

// Spawns the job and returns once its module has exec'd (or it was refused).
[[nodiscard]] Job Start(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options,
                        const JobHooks& hooks = {});

[[nodiscard]] Result RunPolicy(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options,
                               const JobHooks& hooks = {});

// cage::Run(Spec) with hooks (the coding-agent cage's command line).
[[nodiscard]] Result RunSpec(const Spec& spec, const RunOptions& options, const JobHooks& hooks);

// The Spec as a policy (policy/policy.h; role runner): a read-only worktree is the
// bundle and scratch the work directory; a writable worktree is work and
// scratch data; state_dirs are state; read_dirs and read_files are tools;
// exec_writable as the Spec says (default: a writable worktree's); allow is
// an egress-allowlist net on kCageProxyPort. The worktree's history
// (launch/git_history.h ResolveGitCarveOuts, with spec.git_dir) is read_only
// where it lies inside a writable directory and a "git" tool (read-only)
// elsewhere; when it does not prove itself the Error's `where` is
// kGitCarveOutField. Only ParsePolicy makes the Policy.
inline constexpr char kGitCarveOutField[] = "worktree .git";
inline constexpr int kCageProxyPort = 3128;  // inside the job's own network namespace
oarbank::Expected<Policy> PolicyForSpec(const Spec& spec);

nlohmann::ordered_json ResultReport(const Result& result);
// For sandbox-report ($.supervisor): availability, the proof, the process
// container, and the plan (job_plan.h) of the job `run` would start on
// `supervised` (ProbeSupervisedHost's facts) for `policy`, or for an empty
// Spec when there is none.
nlohmann::ordered_json SupervisorReport(const HostFacts& supervised, const Policy* policy);

}  // namespace oarbank::cage
