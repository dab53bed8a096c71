// Why was it refused: the refusals of a job traced from outside its cage
// (trace_log.h), each named by what was reached (path and access, socket
// family, address, syscall), the layer that refused it (Landlock, a
// read-only mount, a seccomp row by its reason, the job's network
// namespace, the egress proxy) and what would allow it, in the words of
// the entry point that started the job: a manifest grant for
// `oarbank-conform module`, a policy field for `run`, an option for `cage`.
//
// Only refusals the cage caused are explained: EACCES from Landlock, EROFS
// from a read-only mount, EPERM from a seccomp row, a SIGSYS kill,
// ENETUNREACH from a network namespace with no route out. A refusal whose
// path the plan does grant is the file's own permissions (or the host's
// mount), not the cage, and is listed apart.
//
// Every path comes from the job, which chooses it: nothing here follows a
// link a job could have planted (grant_path.h), and no suggestion ever
// names a home directory, /etc, the agent's or the system's state, a
// device or the kernel's interfaces, whatever path the job reached.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/explain/trace_log.h"
#include "sandbox/manifest/manifest.h"
#include "sandbox/manifest/tool_registry.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

struct Denial {
  std::string kind;     // "file", "socket", "connect", "listen", "syscall", "signal", "proxy"
  std::string process;  // the program that made the call (the file name it executed); "" for the proxy
  std::string syscall;
  std::string err;        // "EACCES", "EPERM", "SIGSYS", or the proxy's HTTP status
  std::string target;     // the path, address or socket family
  std::string access;     // read, list, write, create, remove, execute, ...
  std::string denied_by;  // "landlock", "read-only mount", "seccomp", "network namespace", "egress proxy",
                          // "file permissions"
  std::string grant;      // what would allow it, "" when nothing can
  std::string why;        // one sentence
  int count = 1;
  std::string example;  // one raw strace line (or the proxy's log line)
};

// Whose words a suggestion is in.
enum class Speaker {
  kManifest,  // `oarbank-conform module`: a module manifest's grants (TOML)
  kPolicy,    // `run`: a policy's fields (JSON)
  kCage,      // `cage`: its command-line options
};

struct ExplainContext {
  Speaker speaker = Speaker::kManifest;
  const Manifest* manifest = nullptr;  // kManifest only
  const Policy* policy = nullptr;
  const Plan* plan = nullptr;
  const ToolRegistry* registry = nullptr;  // kManifest: tools the manifest did not request are looked up here
  std::vector<std::string> homes;          // directories that are homes
  // A supervised job (run, cage): its own network namespace (a refused
  // connect there has no route out).
  bool supervised = false;
};

// The job's refusals, explained, in order of first occurrence and merged
// when the same target is refused the same way again. `others` gets
// refusals that the cage did not cause (file permissions). Each list holds
// at most kMaxDenials distinct refusals; `dropped` counts those left out.
inline constexpr size_t kMaxDenials = 200;
std::vector<Denial> ExplainDenials(const std::vector<TraceCall>& calls, const ExplainContext& context,
                                   std::vector<Denial>* others = nullptr, size_t* dropped = nullptr);

// A refusal of the job's egress proxy, from its log line (an
// "egress_refused" event); nothing for any other line.
std::optional<Denial> ExplainProxyRefusal(const std::string& log_line, Speaker speaker);

// Home directories on this host: /root, /home, and the passwd entries of
// regular users (uid 1000 and up, not nobody).
std::vector<std::string> HostHomes();

nlohmann::ordered_json DenialJson(const Denial& denial);
// Three lines: what, why, and the grant (or that none can).
std::string DenialText(const Denial& denial);
// One line for a terminal: what was refused, by which layer, and what to
// add (or that nothing can). Control characters the job chose are escaped.
std::string DenialLine(const Denial& denial);
// `text` with every control byte and backslash escaped (\n, \x1b): paths
// come from the job and reach the caller's terminal.
std::string EscapeControl(const std::string& text);

}  // namespace oarbank
