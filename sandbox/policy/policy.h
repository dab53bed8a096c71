// The SDK's Policy. ParsePolicy is the only way to make one and a
// Policy never changes afterwards: every cross-field rule (which role may
// name which directory, where tmp must live, which grants may nest) is
// checked once, in ParsePolicy, and nowhere else.
//
// Paths are resolved to canonical absolute paths when the policy is parsed,
// which happens at launch, and never through a symbolic link a job could
// have planted (common/grant_path.h: only the system's own links, in /,
// /usr, /bin, /sbin, /lib*, /var and /etc/alternatives, are followed; any
// other is refused, naming the path and the link). The inode each path led
// to is kept with its grant: what the launcher binds and Landlock is given
// must be that inode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/grant_path.h"

namespace oarbank {

enum class Role { kCoordinator, kRunner, kService, kProbe };
enum class NetMode { kNone, kEgressAllowlist, kEgressAny };
enum class GpuMode { kNone, kCompute };
// The job's own sockets (field "ipc"). kNone: no socket of its own, never
// listening (the module contract). kJob: TCP and UDP on the loopback of the
// network namespace the supervisor gives each job, bind and listen
// included; nothing outside that namespace reaches in, and nothing leads
// out but what net.mode allows. Under the supervisor only (sandbox-exec
// alone shares the caller's loopback), never with egress-any (its ruleset
// owns the job's addresses). Unix sockets stay refused: a pathname socket
// could be a host daemon's, and Landlock confines their connects to the
// job's own directories only from ABI 9.
enum class IpcMode { kNone, kJob };

// What a grant lets the module do. Landlock path rules only add rights, so
// two grants of different kinds must never nest (ParsePolicy refuses it).
enum class Access { kReadExecute, kReadWrite };

struct Grant {
  std::string field;  // JSON path that named it, e.g. "tools[0].paths[1]"
  std::string path;   // canonical absolute path, no link in it
  bool is_dir = true;
  Access access = Access::kReadExecute;
  // The inode the path led to when the policy was read: the launcher's
  // second open of `path`, its bind and the gate are each checked against it.
  FileId inode{};
};

struct Tool {
  std::string id;
  std::vector<std::string> paths;  // canonical
  bool code_exec = false;          // trust = "code-exec": flagged at approval
};

struct NetPolicy {
  NetMode mode = NetMode::kNone;
  std::vector<std::string> allow;  // host[:port], "*." prefix for subdomains
  int proxy_port = 0;              // egress-allowlist only
};

// limits.pids: at most this many processes and threads in the job's
// cgroup leaf (pids.max), where the pids controller is delegated; reported
// `unavailable` elsewhere. Absent: kDefaultPidsMax.
inline constexpr uint64_t kDefaultPidsMax = 4096;
inline constexpr uint64_t kMaxPidsMax = 4194304;  // the kernel's PID_MAX_LIMIT

struct Limits {
  std::optional<double> mem_gb;
  std::optional<double> cpus;
  uint64_t pids = kDefaultPidsMax;  // 1..kMaxPidsMax
  bool pids_set = false;            // the policy names limits.pids (a hard limit must hold it)
};

class Policy;
Expected<Policy> ParsePolicy(std::string_view json_text);

class Policy {
 public:
  int contract() const { return contract_; }
  Role role() const { return role_; }
  const std::string& bundle() const { return bundle_; }
  const std::optional<std::string>& runtime() const { return runtime_; }
  const std::vector<Tool>& tools() const { return tools_; }
  const std::optional<std::string>& work() const { return work_; }
  const std::optional<std::string>& data() const { return data_; }
  const std::optional<std::string>& tmp() const { return tmp_; }
  // A runner's further read-write directories (an agent CLI's own state and
  // caches), canonical.
  const std::vector<std::string>& state() const { return state_; }
  // Read-only carve-outs: directories or files inside a writable grant that
  // the job may read but not change, made by read-only binds in the job's
  // mount namespace (Landlock only adds rights). Field "read_only[i]".
  // Not in grants(): they add no Landlock rule.
  const std::vector<Grant>& read_only() const { return read_only_; }
  const NetPolicy& net() const { return net_; }
  const std::optional<std::string>& broker() const { return broker_; }
  GpuMode gpu() const { return gpu_; }
  bool exec_writable() const { return exec_writable_; }
  IpcMode ipc() const { return ipc_; }
  // Field "debug": ptrace and process_vm_readv/writev of the job's own
  // processes (a debugger, strace, LeakSanitizer). Under the supervisor only,
  // where the job's pid namespace holds nothing else and its init is not
  // dumpable; pidfd_getfd and kcmp stay refused.
  bool debug() const { return debug_; }
  const Limits& limits() const { return limits_; }

  // Every directory or file the policy grants, with the field that named it.
  const std::vector<Grant>& grants() const { return grants_; }

 private:
  Policy() = default;
  // ParsePolicy's stages, one per group of fields, defined in policy.cc
  // only: the one writer of these fields.
  friend struct PolicyBuilder;

  int contract_ = 1;
  Role role_ = Role::kRunner;
  std::string bundle_;
  std::optional<std::string> runtime_;
  std::vector<Tool> tools_;
  std::optional<std::string> work_;
  std::optional<std::string> data_;
  std::optional<std::string> tmp_;
  std::vector<std::string> state_;
  std::vector<Grant> read_only_;
  NetPolicy net_;
  std::optional<std::string> broker_;
  GpuMode gpu_ = GpuMode::kNone;
  bool exec_writable_ = false;
  IpcMode ipc_ = IpcMode::kNone;
  bool debug_ = false;
  Limits limits_;
  std::vector<Grant> grants_;
};

// Reads and parses a policy file; a missing or unreadable file is an Error
// whose `where` is the file name.
Expected<Policy> LoadPolicyFile(const std::string& path);

// The one-line form printed on stderr: "policy: net.proxy_port: expected ...";
// for an error a shortage of resources caused (kResourceShortage: too many
// open files while a grant was resolved), "sandbox: refused: resources: ...".
std::string PolicyErrorLine(const Error& error);
// The exit code for a policy that could not be loaded: 64 for bad input,
// 70 when the host's resources ran short (the policy may be fine).
int PolicyErrorExit(const Error& error);

// Checks one net.allow entry, "host[:port]" with an optional leading "*."
// label, lower-case; nullopt if valid, else what is wrong. Never an IP
// address in any spelling inet_aton reads. The egress proxy checks request
// hosts with the same function (sandbox/egress/allowlist.h), and the
// manifest parser its entries (manifest.h), so a manifest accepts exactly
// the entries a Policy does.
std::optional<std::string> CheckAllowEntry(const std::string& entry);

const char* RoleName(Role role);
const char* NetModeName(NetMode mode);
const char* IpcModeName(IpcMode mode);  // "none", "job"

}  // namespace oarbank
