// Explaining a module's failures under its declared grants, from outside
// the cage: `oarbank-conform module` runs the suite under
// `strace -f -ff -y` and this reads the per-process logs. Only calls made
// after the module's own exec count (the launcher's probing before the cage
// is in place is not the module's doing), and only refusals the cage
// caused: EACCES from Landlock on a path or a TCP port, EPERM from a
// seccomp row, a SIGSYS kill. A refusal whose path the plan does grant is
// the file's own permissions, not the cage, and is listed apart.
//
// Each denial names what was reached (path and access, socket family,
// address, syscall) and which grant of the manifest would have allowed it,
// or that none can: homes, other modules' and the agent's state, devices,
// loopback, listening and the always-on rules are never granted.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/manifest/manifest.h"
#include "sandbox/manifest/tool_registry.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

// One syscall line of an strace log (or a signal), decoded.
struct TraceCall {
  int pid = 0;
  std::string name;               // "openat", or "SIGSYS" for a signal line
  std::vector<std::string> args;  // top-level arguments as strace printed them
  long long ret = 0;
  std::string err;  // "EACCES", "" on success
  std::string raw;  // the line, for the report
  std::string cwd;  // the process's working directory as last seen (AT_FDCWD<...>)
};

// Reads one strace -ff log per pid (files PREFIX.PID) and returns the calls
// the module made: those of the launcher's process after its second
// successful execve (strace's exec of the launcher is the first) and of
// every process it forked afterwards. `module_ran` says whether that exec
// happened at all.
struct ModuleTrace {
  bool module_ran = false;
  std::vector<TraceCall> calls;
};
ModuleTrace ReadModuleTrace(const std::string& prefix);

// Decodes one line (exposed for tests).
std::optional<TraceCall> ParseTraceLine(const std::string& line, int pid);

struct Denial {
  std::string kind;  // "file", "socket", "connect", "listen", "syscall", "signal"
  std::string syscall;
  std::string err;        // "EACCES", "EPERM", "SIGSYS"
  std::string target;     // the path, address or socket family
  std::string access;     // read, list, write, create, remove, execute, ...
  std::string denied_by;  // "landlock", "seccomp", "file permissions"
  std::string grant;      // the manifest grant that would allow it, "" when none can
  std::string why;        // one sentence
  int count = 1;
  std::string example;  // one raw strace line
};

struct ExplainContext {
  const Manifest* manifest = nullptr;
  const Policy* policy = nullptr;
  const Plan* plan = nullptr;
  const ToolRegistry* registry = nullptr;  // tools the manifest did not request are looked up here
  std::vector<std::string> homes;          // directories that are homes
};

// The module's refusals, explained, in order of first occurrence and
// merged when the same target is refused the same way again. `others`
// gets refusals that the cage did not cause (file permissions).
std::vector<Denial> ExplainDenials(const std::vector<TraceCall>& calls, const ExplainContext& context,
                                   std::vector<Denial>* others = nullptr);

// Home directories on this host: /root, /home, and the passwd entries of
// regular users (uid 1000 and up, not nobody).
std::vector<std::string> HostHomes();

nlohmann::ordered_json DenialJson(const Denial& denial);
std::string DenialText(const Denial& denial);

}  // namespace oarbank
