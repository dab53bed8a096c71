// The supervisor: the agent's side of the cage, and the C++ form of the
// cage package's API (go-cage-package.txt): Available(), Run(Spec) ->
// Result, plus RunPolicy for the DESIGN policy with a timeout and output
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

#include "host_facts.h"
#include "job_egress.h"
#include "policy.h"
#include "verify.h"

namespace oarbank::cage {

// The cage configuration (go-cage-package.txt). All paths are absolute.
struct Spec {
  std::vector<std::string> argv;        // run inside the cage, e.g. {"/bin/sh", "-c", cmd}
  std::string worktree;                 // the working directory; read-only unless worktree_writable
  bool worktree_writable = false;
  std::string scratch;                  // always writable; also HOME and TMPDIR
  std::vector<std::string> read_dirs;   // extra read-only (and executable) directories
  std::vector<std::string> read_files;  // extra read-only (and executable) files
  int abi_floor = 1;                    // minimum Landlock ABI, else refused (>= 1)
};

// Why a job ended other than by itself. `refused` is never a job that ran:
// the cage could not be set up (or the gate refused the launcher), and no
// module instruction ran.
enum class Fault {
  kNone,
  kRefused,  // the cage could not be set up in full; reason says what
  kExec,     // the cage was in place but exec failed (exit 71)
  kTimeout,  // killed at the timeout
  kOom,      // killed by the kernel at memory.max
};
const char* FaultName(Fault fault);  // "none", "refused", "exec", "timeout", "oom"

// What the job ran in, for the result and the report.
struct Container {
  std::string namespaces;     // "user,pid,ipc,uts,mnt,net"
  std::string net;            // the network namespace and why
  std::string cgroup;         // the leaf, or empty
  std::string cgroup_detail;  // why there is none, or its controllers
  std::string limits;         // "memory.max=... cpu.max=..." or "none"
  // Cage-before-capability: "proven (<attestation path>)", or
  // "unproven (operator override)" for a job started with
  // RunOptions::unproven.
  std::string proof;
  GateReading verified;       // what the gate read in /proc/<pid>/status
};

struct Result {
  std::string stdout_text;
  std::string stderr_text;
  int exit_code = -1;  // the module's exit status, -1 when it did not exit by itself
  int signal = 0;      // the signal that killed it (SIGSYS from a seccomp kill; SIGKILL at a timeout or OOM)
  bool refused = false;
  Fault fault = Fault::kNone;
  std::string reason;  // for a fault: what, naming the step, capability or file
  bool stdout_truncated = false;  // output beyond the cap is read and dropped, never kept
  bool stderr_truncated = false;
  uint64_t stdout_dropped = 0;
  uint64_t stderr_dropped = 0;
  // Bytes kept (up to the cap). With a spool file (RunOptions::stdout_fd)
  // they are all in the file and stdout_text is its first kSpoolWindow.
  uint64_t stdout_bytes = 0;
  uint64_t stderr_bytes = 0;
  bool stdout_spooled = false;
  bool stderr_spooled = false;
  std::string spool_error;  // a write to a spool file failed: which and why (the job still ran)
  Container container;
  double seconds = 0;
};

// With a spool file, the bytes of a stream kept in memory (the rest of it
// goes only to the file).
inline constexpr size_t kSpoolWindow = 64 << 10;

struct RunOptions {
  std::chrono::milliseconds timeout{0};  // 0: none
  size_t stdout_max = 1 << 20;
  size_t stderr_max = 1 << 20;
  // The caller's files (open for writing; not closed here): every byte kept
  // of the stream is written there, and only the first kSpoolWindow is kept
  // in memory, so a large cap costs no memory.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The node turns the policy's limits into memory.max and cpu.max; the
  // job is refused where they cannot be enforced.
  bool hard_limits = false;
  // Variables the job gets besides the built ones (OARBANK_*, the job's own).
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;  // default: the agent's
  // Root only: the job's uid and gid (mapped into its user namespace).
  std::optional<uid_t> run_as_uid;
  std::optional<gid_t> run_as_gid;
  int abi_floor = 0;            // refused below this Landlock ABI
  int landlock_abi_cap = -1;    // testing: lower the Landlock ABI used
  // egress-allowlist: the proxy the supervisor serves as the only listener
  // of the job's network namespace (job_egress.h), for the job's lifetime.
  JobEgressOptions egress;
  // Cage-before-capability: a job runs only when the battery attestation
  // (attestation.h) proves its policy class for this kernel, this launcher
  // (the running executable) and this battery; otherwise it is refused,
  // naming battery.proven, before anything is spawned. `unproven` runs it
  // anyway, and the result says so (Container::proof): for the battery's
  // own supervised probes and for tests of the cage itself. It is an option
  // only; no environment variable sets it.
  bool unproven = false;
  // Where the attestation is read; empty: AttestationPath().
  std::string attestation_path;
};

// The capability gate: whether the cage, namespaces included, can be
// enforced in full on this host. Where user namespaces are refused it says
// so; there is no fallback to a launch without them. The proof says which
// policy classes the battery attestation proves here (a job of any other
// class is refused unless started with RunOptions::unproven).
struct Availability {
  bool available = false;
  std::string reason;  // "" when available
  bool attested = false;                    // a valid attestation applies here
  std::vector<std::string> proven_classes;  // what it proves
  std::string proof_detail;                 // why none applies, when none does
};
Availability AssessAvailability(const HostFacts& host, bool namespaces_ok, const std::string& namespaces_detail);
Availability CheckAvailability();
// True when the cage can be enforced here and the battery has proven the
// class of Run(Spec)'s policies (a runner with no network, nothing written
// executable, no GPU, no broker), so Run(Spec) would not be refused.
bool Available();

// A running job. Move-only; Wait() to the end.
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
  friend Job Start(const Policy&, const std::vector<std::string>&, const RunOptions&);
  std::unique_ptr<State> state_;
};

// Spawns the job and returns once its module has exec'd (or it was refused).
Job Start(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options);

Result RunPolicy(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options);
Result Run(const Spec& spec, const RunOptions& options);
Result Run(const Spec& spec);

// The Spec as a DESIGN policy (role runner): a read-only worktree is the
// bundle and scratch the work directory; a writable worktree is work and
// scratch data; read_dirs and read_files are tools. Only ParsePolicy makes it.
oarbank::Result<Policy> PolicyForSpec(const Spec& spec);

nlohmann::ordered_json ResultReport(const Result& result);
// For sandbox-report: availability, namespaces, the process container.
nlohmann::ordered_json SupervisorReport(const HostFacts& host);

}  // namespace oarbank::cage
