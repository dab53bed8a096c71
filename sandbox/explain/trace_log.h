// Reading strace's per-process logs of a job traced from outside its cage
// (`strace -f -ff -y`): one line per call, decoded, and which processes and
// calls were the job's own rather than the launcher's setup before the
// cage was in place. The explainer (explain.h) reads what this returns.
//
// strace rather than a tracer of our own: it decodes every call's
// arguments (paths through -y, socket addresses, flags) for every
// architecture Debian ships, which no small tracer would match.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace oarbank {

// One syscall line of an strace log (or a signal), decoded.
struct TraceCall {
  int pid = 0;
  std::string name;               // "openat", or "SIGSYS" for a signal line
  std::vector<std::string> args;  // top-level arguments as strace printed them
  long long ret = 0;
  // For fork, vfork, clone and clone3: the child's pid as the tracer sees
  // it (strace --decode-pids=pidns prints it beside the pid in the job's
  // namespace), which names the child's log. 0 otherwise.
  int child = 0;
  std::string err;       // "EACCES", "" on success
  std::string raw;       // the line, for the report
  std::string cwd;       // the process's working directory as last seen (AT_FDCWD<...>)
  std::string program;   // the file name of the program the process last executed
  int tgid = 0;          // the process (thread group) the calling thread belongs to
  bool unknown = false;  // "= ?": the call never returned (the process ended in it)
};

// Decodes one line (exposed for tests).
std::optional<TraceCall> ParseTraceLine(const std::string& line, int pid);

// "\"/a\\x62\"" -> "/ab"; nothing when the token is not a string.
std::optional<std::string> DecodeString(const std::string& token);

// "AT_FDCWD</work>" or "3</dir>" -> "/work": strace -y prints the path of a
// directory fd (and the cwd for AT_FDCWD).
std::optional<std::string> FdPath(const std::string& token);

// Where the job's calls begin.
enum class TraceStart {
  // `sandbox-exec` under strace: the launcher's process after its second
  // successful execve (strace's exec of the launcher is the first), and
  // every process it forks afterwards.
  kLauncherSecondExec,
  // A supervised job traced from its keeper (strace -p): the first
  // successful execve of any process is the module's (the keeper, init and
  // the launcher never exec), and every process it forks afterwards.
  kFirstExec,
};

// Reads one log per pid (files PREFIX.PID) and returns the job's calls,
// each with its working directory. `module_ran` says whether the module's
// exec happened at all.
struct ModuleTrace {
  bool module_ran = false;
  std::vector<TraceCall> calls;
  bool cut = false;       // the log held more than the reader keeps: later calls are missing
  bool untraced = false;  // the job made a process with CLONE_UNTRACED: its calls are missing
};
ModuleTrace ReadModuleTrace(const std::string& prefix, TraceStart start = TraceStart::kLauncherSecondExec);

// The same from one stream (MergedStraceCommand) read from `fd` (from its
// start; the fd stays open).
ModuleTrace ReadMergedTrace(int fd, TraceStart start);

// strace's -e argument: file and network calls, process creation (to
// follow forks), and every syscall the seccomp table names, so that a
// refusal of any of them is seen. '?' keeps strace quiet about a name it
// does not know on this architecture.
std::string TraceSet();

// strace tracing every process (-f), a log per process at PREFIX.PID
// (-ff), paths of fds shown (-y), forked pids as the tracer sees them
// (--decode-pids=pidns), TraceSet's calls. The traced command or "-p PID"
// follows.
std::vector<std::string> StraceCommand(const std::string& strace, const std::string& prefix);

// The same into one stream, written to the tracer's descriptor `fd`
// (reopened through /proc/self/fd): a file with no name (O_TMPFILE), so
// that no process can plant a link where the tracer, which may be root,
// writes. Each line begins with the pid.
std::vector<std::string> MergedStraceCommand(const std::string& strace, int fd);

}  // namespace oarbank
