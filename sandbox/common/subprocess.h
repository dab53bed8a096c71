// Running a helper program and capturing what it says: the one routine the
// agent, the broker and the battery use to start podman, oarbank-netfilter
// and the probes.
//
// The child is made with vfork (no copy of the caller's address space: the
// battery starts about 2,500 of them) and makes system calls only until it
// execs, so a caller with threads is safe. It gets exactly `env`, stdin from
// `input` (through a socket, so a child that ends before reading it cannot
// take the caller with it by SIGPIPE) or /dev/null, its stdout and stderr
// captured up to a cap each, the extra descriptors `fds` names, and no other
// descriptor unless asked. At the deadline, or when `stop` says so, it is ended (its
// whole process group with `new_process_group`) and reaped; nothing of it
// is left to the caller.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oarbank {

struct SubprocessSpec {
  std::vector<std::string> argv;  // argv[0] is the program's absolute path
  std::vector<std::string> env;   // the whole environment
  std::string input;              // written to its stdin; empty: /dev/null
  // Descriptors of the caller that the child gets as the given numbers (3
  // and up), e.g. {userns_fd, 3}.
  std::vector<std::pair<int, int>> fds;
  // Where its stdout and stderr go instead of being captured (a file of the
  // caller's; both may be the same), or -1.
  int stdout_fd = -1, stderr_fd = -1;
  std::string cwd;  // its working directory, or the caller's
  // Namespaces it enters before exec: {fd of /proc/PID/ns/X, CLONE_NEWX}.
  std::vector<std::pair<int, int>> namespaces;
  // The caller's descriptors without close-on-exec stay open in the child
  // (the battery hands its probes such descriptors on purpose); otherwise
  // the child has 0, 1, 2 and `fds` alone.
  bool inherit_fds = false;
  std::optional<uid_t> uid;  // run as uid (and gid uid, no groups): the caller must be root
  bool new_process_group = false;
  bool die_with_caller = false;  // PR_SET_PDEATHSIG SIGKILL
};

struct CaptureLimits {
  std::chrono::steady_clock::time_point deadline;
  size_t max_bytes = 1 << 20;  // kept of each stream; the rest is read and dropped
  // Each chunk read, as it arrives (0: stdout, 1: stderr), before the cap.
  std::function<void(int stream, std::string_view chunk)> on_output;
  // A descriptor whose hang-up (POLLHUP/POLLERR) ends the run, or -1.
  int hangup_fd = -1;
  // Called once the child runs, before its output is read: for a caller
  // that talks to it over a descriptor of its own (a gate). Its output
  // waits in the pipes meanwhile.
  std::function<void(pid_t)> on_start;
  // Ends the child instead of SIGKILL when the deadline passes or
  // `hangup_fd` hangs up, and returns its wait status (-1: unknown); it
  // must reap it.
  std::function<int(pid_t)> end;
};

struct CapturedRun {
  bool started = false;
  std::string error;     // why it could not be started ("pipe: ...", "vfork: ...")
  int wait_status = -1;  // as waitpid gives it, once started; -1 unknown
  bool timed_out = false;
  bool hung_up = false;  // hangup_fd hung up first
  std::string out, err;  // up to max_bytes each
  double ms = 0;

  // The exit code, 128 + the signal for a child killed by one, -1 when it
  // never started or its end is unknown.
  int ExitCode() const;
};

// Starts `spec` and captures it until both of its outputs close and it has
// exited (then it is reaped), or the deadline passes or `hangup_fd` hangs
// up (then it is ended).
CapturedRun RunCaptured(const SubprocessSpec& spec, const CaptureLimits& limits);

}  // namespace oarbank
