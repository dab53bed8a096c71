// oarbank-sandbox's public API: run a command in the cage and get its
// result. Installed as <oarbank/cage.h>; link oarbank::sandbox (CMake:
// find_package(oarbank_sandbox CONFIG)) or `pkg-config --libs
// oarbank-sandbox`. This header pulls in nothing but the standard library.
//
//   oarbank::cage::Spec spec;
//   spec.argv = {"/bin/sh", "-c", "make test"};
//   spec.worktree = "/srv/checkout";
//   spec.scratch = "/srv/scratch";
//   oarbank::cage::Result r = oarbank::cage::Run(spec);
//   if (r.refused()) ...  // nothing ran; r.reason says why
//
// Cage-before-capability: a job runs only when the battery attestation
// (written by `oarbank-conform`) proves its policy class for this kernel,
// this battery and the running executable, which is the launcher of every
// job it starts. A program that links this library is not the oarbank-agent
// the battery drove, so its jobs are refused (Fault::kRefused, naming
// battery.proven) unless the attestation was made for it or it sets
// RunOptions::unproven, whose results say "unproven (operator override)".
//
// Caller obligations: the thread that starts a job must outlive it, and
// nothing else in the program may reap the job's processes (no waitpid(-1)).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace oarbank {

// What the supervisor's gate read in the launcher's /proc/<pid>/status
// before it let it exec (the fields verbatim).
struct GateReading {
  std::string no_new_privs;
  std::string seccomp;
  std::string seccomp_filters;
  std::string cap_eff;
  std::string cap_prm;
  std::string cap_inh;
  std::string cap_amb;
  std::string ppid;
};

namespace cage {

// The cage configuration. All paths are absolute.
struct Spec {
  std::vector<std::string> argv;  // run inside the cage, e.g. {"/bin/sh", "-c", cmd}
  std::string worktree;           // the working directory; read-only unless worktree_writable
  bool worktree_writable = false;
  std::string scratch;                  // always writable; also HOME and TMPDIR
  std::vector<std::string> read_dirs;   // extra read-only (and executable) directories
  std::vector<std::string> read_files;  // extra read-only (and executable) files
  int abi_floor = 1;                    // minimum Landlock ABI, else refused (>= 1)
  // Further read-write directories: the agent CLI's own state and caches.
  std::vector<std::string> state_dirs;
  // Parts of a writable directory (worktree, scratch, state) the job may
  // read but not change, bound read-only in its mount namespace. A writable
  // worktree's history is always among them: its .git directory, or its
  // .git pointer file with the git and common directories it names (those
  // outside every writable directory are granted read-only instead).
  std::vector<std::string> read_only;
  // The worktree's git directory, when its .git pointer names one that does
  // not name the worktree back (a `git init --separate-git-dir` repository):
  // the caller's word for it. Without it such a pointer is refused, since a
  // job could have written it in an earlier run.
  std::string git_dir;
  // Whether the job may execute what it writes (a compiled test, a build
  // script). Unset: yes for a writable worktree, no otherwise.
  std::optional<bool> exec_writable;
  // Egress allowlist, "host[:port]" ("*." for subdomains, 443 by default):
  // the job reaches these through its own proxy (HTTPS_PROXY) and nothing
  // else. Empty: no network at all.
  std::vector<std::string> allow;
  // Full trust, separately approved: outbound to any public address and
  // the stack's resolver, never loopback, link-local, private addresses or
  // the host's own (net.mode "egress-any", docs/egress.md). Default: none.
  bool egress_any = false;
  // The job's own sockets (the policy's ipc "job"): TCP and UDP on the
  // loopback of its own network namespace, bind and listen included, for
  // test servers, language servers and build daemons; nothing outside that
  // namespace reaches them, and nothing leads out but the allow list's
  // proxy. Unix sockets from Landlock ABI 9 (Linux 7.1), where only those
  // the job's own processes bound answer it; below it they stay refused.
  // Ignored with egress_any (that job network's ruleset decides every
  // address). Default: on.
  bool job_sockets = true;
  // Debugging inside the job (the policy's debug): ptrace and
  // process_vm_readv/writev of the job's own processes, for gdb, strace and
  // LeakSanitizer; its pid namespace holds nothing else and its init is not
  // dumpable. Default: off.
  bool debug = false;
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
  GateReading verified;  // what the gate read in /proc/<pid>/status
  // egress-any: packets the job network's ruleset dropped (read when the
  // job ended); -1 for other modes or when unreadable.
  long long net_dropped = -1;
};

struct Result {
  std::string stdout_text;
  std::string stderr_text;
  int exit_code = -1;  // the module's exit status, -1 when it did not exit by itself
  int signal = 0;      // the signal that killed it (SIGSYS from a seccomp kill; SIGKILL at a timeout or OOM)
  // Refused: the cage could not be set up (or the gate refused the
  // launcher) and nothing of the job ran; `reason` says why.
  bool refused() const { return fault == Fault::kRefused; }
  Fault fault = Fault::kNone;
  std::string reason;             // for a fault: what, naming the step, capability or file
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
  // A write to a spool file failed: which and why. The job still ran, but
  // the file is short: `run` and `cage` exit 74 for it, whatever the job's
  // status; a library caller must not take exit_code 0 for complete output.
  std::string spool_error;
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
  int abi_floor = 0;  // refused below this Landlock ABI
  // Use at most this Landlock ABI (-1: what the kernel offers): what the
  // cage would be on an older kernel. It can only lower, never raise, and a
  // policy that needs more is refused.
  int landlock_abi_max = -1;
  // Cage-before-capability: a job runs only when the battery attestation
  // (attestation.h) proves its policy class for this kernel, this launcher
  // (the running executable) and this battery; otherwise it is refused,
  // naming battery.proven, before anything is spawned. `unproven` runs it
  // anyway, and the result says so (Container::proof): for the battery's
  // own supervised probes and for tests of the cage itself. It is an option
  // only; no environment variable sets it.
  bool unproven = false;
  // Where the attestation is read; empty: $OARBANK_BATTERY_ATTESTATION, else
  // the installed default (/var/lib/oarbank/battery-attestation.json).
  std::string attestation_path;
  // For the job's container broker (`broker --job-netns`): a symlink made
  // at this path, once the gate has verified the job, to the job's network
  // namespace (/proc/<init>/ns/net), removed when the job ends. Empty: none.
  std::string publish_netns;

  // Interactive use. The caller's fds are never closed here and never
  // reach the job: the supervisor relays between them and the job.
  // Every byte of the job's stdout (stderr) is also written here as it
  // arrives, all of it: the caps bound only the captured copy (Result).
  int stream_stdout_fd = -1;
  int stream_stderr_fd = -1;
  // Read until EOF and relayed into the job's stdin (a pipe; with `pty`,
  // the terminal, where EOF is sent as ^D, its EOF character).
  // -1: the job's stdin is /dev/null.
  int stdin_fd = -1;
  // The job runs on a pseudo-terminal of its own devpts instance: its
  // stdin, stdout, stderr and controlling terminal. What it writes arrives
  // as stdout (stderr is the same terminal).
  bool pty = false;
  // With `pty`: the caller's terminal, whose window size the job's terminal
  // takes, at the start and whenever it changes. Raw mode is the caller's
  // to set (raw_terminal.h does it for `run --pty`).
  int terminal_fd = -1;
  // The size of the job's private /dev/shm, a tmpfs of its own; its pages
  // are charged to the job's cgroup leaf (memory.max) where there is one.
  uint64_t shm_max = uint64_t{64} << 20;
};

// The capability gate: whether the cage, namespaces included, can be
// enforced in full on this host. Where user namespaces are refused it says
// so; there is no fallback to a launch without them. The proof says which
// policy classes the battery attestation proves here (a job of any other
// class is refused unless started with RunOptions::unproven).
struct Availability {
  bool available = false;
  std::string reason;                       // "" when available
  bool attested = false;                    // a valid attestation applies here
  std::vector<std::string> proven_classes;  // what it proves
  std::string proof_detail;                 // why none applies, when none does
};
Availability CheckAvailability();
// True when the cage can be enforced here and the battery has proven the
// class of a default Spec's policy (a runner with no network, nothing
// written executable, no GPU, no broker), so such a Run(Spec) would not be
// refused. A Spec with a writable worktree (exec_writable) or an allow list
// is another class: CheckAvailability().proven_classes lists those proven.
bool Available();

// The Spec as a runner policy (a read-only worktree is the bundle and
// scratch the work directory; a writable worktree is work and scratch data;
// state_dirs are state; read_dirs and read_files are tools; read_only and
// the worktree's history are read_only carve-outs), run under the supervisor: fresh
// user, pid, ipc, uts, mount and network namespaces, the launcher verified
// from outside before it may exec. Returns once nothing of the job is left.
[[nodiscard]] Result Run(const Spec& spec, const RunOptions& options);
[[nodiscard]] Result Run(const Spec& spec);

}  // namespace cage
}  // namespace oarbank
