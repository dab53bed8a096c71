#include "sandbox/explain/explain.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "sandbox/common/grant_path.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/common/path_within.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/host/landlock_abi.h"

namespace oarbank {
namespace {

// A path the job named, canonical where only the system's own links lie
// on the way (grant_path.h), else the same path lexically normalized: a
// link the job planted is never followed to decide what to suggest.
std::string Normalize(const std::string& path) {
  const std::string lexical = NormalizePath(path);
  if (auto resolved = ResolveGrantPath(lexical); resolved.ok()) return resolved.value().path;
  const auto slash = lexical.rfind('/');
  if (slash != std::string::npos && slash > 0)
    if (auto parent = ResolveGrantPath(lexical.substr(0, slash)); parent.ok())
      return parent.value().path + lexical.substr(slash);
  return lexical;
}

struct PathOp {
  std::string_view name;
  int path_arg;
  int dirfd_arg;            // -1: relative to the cwd
  std::string_view access;  // "" : decided from the open flags
};

constexpr PathOp kPathOps[] = {
    {"open", 0, -1, ""},
    {"openat", 1, 0, ""},
    {"openat2", 1, 0, ""},
    {"creat", 0, -1, "create"},
    {"execve", 0, -1, "execute"},
    {"execveat", 1, 0, "execute"},
    {"mkdir", 0, -1, "create directory"},
    {"mkdirat", 1, 0, "create directory"},
    {"mknod", 0, -1, "create"},
    {"mknodat", 1, 0, "create"},
    {"unlink", 0, -1, "remove"},
    {"unlinkat", 1, 0, "remove"},
    {"rmdir", 0, -1, "remove directory"},
    {"rename", 1, -1, "rename"},
    {"renameat", 3, 2, "rename"},
    {"renameat2", 3, 2, "rename"},
    {"link", 1, -1, "link"},
    {"linkat", 3, 2, "link"},
    {"symlink", 1, -1, "create"},
    {"symlinkat", 2, 1, "create"},
    {"truncate", 0, -1, "truncate"},
    // A file's mode, owner, times and extended attributes: no Landlock right;
    // the cage's read-only mounts refuse them outside the writable grants.
    {"chmod", 0, -1, "change metadata"},
    {"fchmodat", 1, 0, "change metadata"},
    {"fchmodat2", 1, 0, "change metadata"},
    {"chown", 0, -1, "change metadata"},
    {"lchown", 0, -1, "change metadata"},
    {"fchownat", 1, 0, "change metadata"},
    {"utime", 0, -1, "change metadata"},
    {"utimes", 0, -1, "change metadata"},
    {"futimesat", 1, 0, "change metadata"},
    {"utimensat", 1, 0, "change metadata"},
    {"setxattr", 0, -1, "change metadata"},
    {"lsetxattr", 0, -1, "change metadata"},
    {"removexattr", 0, -1, "change metadata"},
    {"lremovexattr", 0, -1, "change metadata"},
};

uint64_t NeededRights(const std::string& access) {
  if (access == "read") return kFsReadFile;
  if (access == "list") return kFsReadDir;
  if (access == "write") return kFsWriteFile;
  if (access == "create") return kFsMakeReg | kFsWriteFile;
  if (access == "create directory") return kFsMakeDir;
  if (access == "remove") return kFsRemoveFile;
  if (access == "remove directory") return kFsRemoveDir;
  if (access == "execute") return kFsExecute;
  if (access == "rename") return kFsRefer | kFsMakeReg | kFsRemoveFile;
  if (access == "link") return kFsRefer | kFsMakeReg;
  if (access == "truncate") return kFsTruncate;
  return 0;
}

bool IsWriteAccess(const std::string& access) { return access != "read" && access != "list" && access != "execute"; }

std::string OpenAccess(const std::string& flags) {
  if (flags.find("O_CREAT") != std::string::npos) return "create";
  if (flags.find("O_WRONLY") != std::string::npos || flags.find("O_RDWR") != std::string::npos ||
      flags.find("O_TRUNC") != std::string::npos)
    return "write";
  if (flags.find("O_DIRECTORY") != std::string::npos) return "list";
  return "read";
}

// What a refusal needs, apart from a path: each in the three vocabularies.
enum class Ask { kExecWritable, kNet, kBroker, kJobIpc, kDebug, kGpu, kWritableWorktree };

struct AskWords {
  Ask ask;
  const char* manifest;  // "" : no manifest grant does it
  const char* policy;
  const char* cage;
};

constexpr AskWords kAskWords[] = {
    {Ask::kExecWritable, "exec_writable = true", "\"exec_writable\": true", "--exec-writable"},
    {Ask::kNet, "net = { mode = \"egress-allowlist\", allow = [\"<host>\"] }",
     "\"net\": {\"mode\": \"egress-allowlist\", \"allow\": [\"<host>\"], \"proxy_port\": <port>}", "--allow <host>"},
    {Ask::kBroker, "containers = [{ image = \"...@sha256:...\", platform = \"linux/amd64\" }]",
     "\"broker\": \"<socket>\"", ""},
    {Ask::kJobIpc, "", "\"ipc\": \"job\"", "leave out --no-job-sockets"},
    {Ask::kDebug, "", "\"debug\": true", "--debug"},
    {Ask::kGpu, "devices = { gpu = \"compute\" }", "\"devices\": {\"gpu\": \"compute\"}", ""},
    {Ask::kWritableWorktree, "", "", "--writable"},
};

std::string Words(Speaker speaker, Ask ask) {
  for (const auto& w : kAskWords)
    if (w.ask == ask)
      return speaker == Speaker::kManifest ? w.manifest : speaker == Speaker::kPolicy ? w.policy : w.cage;
  return "";
}

// Never suggested, whatever path the job reached: the system's and the
// agent's own, the kernel's interfaces, devices, the base system (for a
// write). Homes are the context's.
constexpr const char* kNeverSuggested[] = {"/etc",  "/dev",  "/proc",    "/sys",     "/run",       "/var/run",
                                           "/boot", "/root", "/var/lib", "/var/log", "/var/spool", "/var/mail"};
constexpr const char* kBaseSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// A socket address as strace prints it: {sa_family=AF_INET,
// sin_port=htons(80), sin_addr=inet_addr("198.18.0.1")}, the AF_INET6 and
// AF_UNIX forms, in connect's second argument, sendto's fifth or
// sendmsg's msg_name.
struct SockAddr {
  bool unix_socket = false;
  std::string address, port;
};

SockAddr ParseSockAddr(const TraceCall& call) {
  const size_t at = call.name == "sendto" ? 4 : 1;
  const std::string sa = call.args.size() > at ? call.args[at] : "";
  auto field = [&](const std::string& key) -> std::string {
    const auto found = sa.find(key);
    if (found == std::string::npos) return "";
    const auto start = found + key.size();
    const auto end = sa.find_first_of(")\",}", start);
    return sa.substr(start, end == std::string::npos ? std::string::npos : end - start);
  };
  SockAddr out;
  if (sa.find("AF_UNIX") != std::string::npos) {
    out.unix_socket = true;
    out.address = field("sun_path=\"");
    return out;
  }
  out.address = field("inet_addr(\"");
  if (out.address.empty()) out.address = field("inet_pton(AF_INET6, \"");
  out.port = field("htons(");
  return out;
}

class Explainer {
 public:
  explicit Explainer(const ExplainContext& c) : c_(c) {
    if (c.manifest != nullptr)
      for (const auto& t : c.manifest->sandbox.tools) requested_.insert(t.id);
  }

  // A path refusal: from the cage, or from the file's own permissions.
  Denial ExplainPath(const TraceCall& call, const std::string& path, const std::string& access) {
    Denial d;
    d.kind = "file";
    d.syscall = call.name;
    d.err = call.err;
    d.target = path;
    d.access = access;
    d.example = call.raw;
    const uint64_t need = NeededRights(access) & c_.plan->landlock.handled_fs;
    // The cage leaves the writable grants writable: EROFS there is the host's.
    const bool read_only = call.err == "EROFS";
    bool in_writable_grant = false;
    for (const auto& g : c_.policy->grants())
      in_writable_grant |= g.access == Access::kReadWrite && IsAtOrBelow(path, g.path);
    bool in_carve_out = false;
    for (const auto& g : c_.policy->read_only()) in_carve_out |= IsAtOrBelow(path, g.path);
    if (read_only && in_writable_grant && !in_carve_out) {
      d.denied_by = "file permissions";
      d.why = "the grants allow it; the host mounts it read-only (not the cage)";
      return d;
    }
    if (!read_only && need != 0 && (GrantedRights(path) & need) == need) {
      d.denied_by = "file permissions";
      d.why = "the grants allow it; the file's own permissions refused it (not the cage)";
      return d;
    }
    // Outside the writable grants the cage's mounts are read-only, and the
    // VFS answers EROFS before Landlock is asked.
    d.denied_by = read_only ? "read-only mount" : "landlock";
    if (in_carve_out) {
      d.why = "a read-only carve-out inside a writable directory (the worktree's .git, or read_only): never writable";
      return d;
    }
    // Inside a grant first: a worktree under /home is the job's own.
    if (WhyInGrant(path, access, d)) return d;
    if (WhyNever(path, access, d)) return d;
    SuggestPath(path, access, d);
    return d;
  }

  std::optional<Denial> ExplainSocket(const TraceCall& call) {
    Denial d;
    d.kind = "socket";
    d.syscall = call.name;
    d.err = call.err;
    d.denied_by = "seccomp";
    d.example = call.raw;
    const std::string family = call.args.empty() ? "?" : call.args[0];
    d.target = family + (call.args.size() > 1 ? " " + call.args[1] : "");
    if (family == "AF_UNIX") {
      if (c_.policy->ipc() == IpcMode::kJob) {
        d.why =
            "unix sockets of the job's own need Landlock ABI 9 (Linux 7.1): below it nothing keeps a connect by "
            "path from a host daemon's socket";
        return d;
      }
      if (c_.speaker == Speaker::kManifest && c_.manifest->sandbox.containers.empty())
        d.grant = Words(c_.speaker, Ask::kBroker);
      d.why =
          "no unix socket but the job's container broker endpoint (a pathname socket could be a host daemon's; no "
          "pipe or D-Bus socket ever)";
      return d;
    }
    if (family == "AF_INET" || family == "AF_INET6") {
      if (c_.policy->net().mode == NetMode::kNone) {
        d.grant = Words(c_.speaker, Ask::kNet);
        d.why = "no network: an allowlist reaches the listed hosts through the agent's proxy ($HTTPS_PROXY)";
        if (c_.supervised && c_.speaker != Speaker::kManifest)
          d.why += "; a socket of the job's own, on its private loopback, needs " + Words(c_.speaker, Ask::kJobIpc);
      } else {
        d.why =
            "only TCP streams to the agent's proxy: UDP, raw and other protocols never (egress-any would, under run "
            "only)";
      }
      return d;
    }
    d.why = "only unix, IPv4 and IPv6 sockets exist in the cage (" + family + " is never granted)";
    return d;
  }

  std::optional<Denial> ExplainConnect(const TraceCall& call) {
    Denial d;
    d.kind = call.name == "connect" ? "connect" : "send";
    d.syscall = call.name;
    d.err = call.err;
    d.denied_by = call.err == "EACCES" ? "landlock" : "network namespace";
    d.example = call.raw;
    const SockAddr sa = ParseSockAddr(call);
    if (sa.unix_socket) {
      d.target = "unix:" + sa.address;
      if (c_.policy->ipc() == IpcMode::kJob) {
        d.why =
            "the job reaches only the unix sockets its own processes bound: any other, in a worktree's .git, its "
            "scratch or a shared data directory, could be a host daemon's or another job's";
        return d;
      }
      d.why = "no unix socket but the job's container broker endpoint";
      if (c_.speaker == Speaker::kManifest && c_.manifest->sandbox.containers.empty())
        d.grant = Words(c_.speaker, Ask::kBroker);
      return d;
    }
    d.target = sa.address + ":" + sa.port;
    if (c_.policy->net().mode == NetMode::kEgressAny) return ExplainRuleset(d, sa);
    const std::string& addr = sa.address;
    const bool loopback = addr.rfind("127.", 0) == 0 || addr == "::1" || addr.rfind("::ffff:127.", 0) == 0;
    const bool link_local = addr.rfind("169.254.", 0) == 0 || addr.rfind("fe80:", 0) == 0;
    if (loopback || link_local) {
      d.why = std::string("never ") + (loopback ? "the host's loopback" : "link-local") +
              ", whatever the grants (only the agent's proxy port is reachable)";
      return d;
    }
    d.why = d.denied_by == "network namespace"
                ? "the job's own network has no route out: hosts are reached through the agent's proxy ($HTTPS_PROXY)"
                : "only the agent's proxy port (" + std::to_string(c_.policy->net().proxy_port) +
                      ") is reachable: connect through $HTTPS_PROXY";
    d.grant = c_.speaker == Speaker::kManifest ? "net.allow = [\"<host>:" + sa.port + "\"] (through the proxy)"
                                               : Words(c_.speaker, Ask::kNet);
    return d;
  }

  // egress-any: the job's ruleset refuses every address that is not public
  // (a TCP reset, ECONNREFUSED; EPERM for a datagram), by the same classes
  // the proxy uses. A public address refused is not the cage's doing.
  std::optional<Denial> ExplainRuleset(Denial d, const SockAddr& sa) const {
    const auto ip = egress::ParseIpAddress(sa.address);
    if (!ip) return std::nullopt;
    const auto reason = egress::NonPublicReason(*ip);
    if (!reason) return std::nullopt;
    d.denied_by = "egress-any ruleset";
    d.why = "egress-any reaches public addresses only: " + sa.address + " is " + *reason + " (never granted)";
    return d;
  }

  std::optional<Denial> ExplainSyscall(const TraceCall& call) {
    const SeccompRule* row = nullptr;
    for (const auto& rule : c_.plan->seccomp)
      if (rule.syscall == call.name && (row == nullptr || ErrnoName(rule.err) == call.err)) row = &rule;
    if (row == nullptr) return std::nullopt;
    Denial d;
    d.kind = call.name == "listen" || call.name == "bind" ? "listen" : "syscall";
    d.syscall = call.name;
    d.err = call.err;
    d.denied_by = "seccomp";
    d.target = call.name;
    d.example = call.raw;
    d.why = row->why;
    switch (row->when) {
      case When::kExecWritableDeny:
        if (c_.policy->role() == Role::kRunner) d.grant = Words(c_.speaker, Ask::kExecWritable);
        break;
      case When::kNoBroker: d.grant = Words(c_.speaker, Ask::kBroker); break;
      case When::kNetNone: d.grant = Words(c_.speaker, Ask::kNet); break;
      case When::kNoJobIpc:
        if (c_.supervised && c_.policy->net().mode != NetMode::kEgressAny) d.grant = Words(c_.speaker, Ask::kJobIpc);
        break;
      case When::kNoDebug:
        if (c_.supervised) d.grant = Words(c_.speaker, Ask::kDebug);
        break;
      case When::kNetEgressAllowlist:
      case When::kInetSockets:
      case When::kAlways: break;
    }
    if (d.grant.empty()) d.why += " (always refused)";
    return d;
  }

 private:
  static std::string ErrnoName(int err) {
    switch (err) {
      case EPERM: return "EPERM";
      case EACCES: return "EACCES";
      case ENOSYS: return "ENOSYS";
      case EAFNOSUPPORT: return "EAFNOSUPPORT";
      case EINVAL: return "EINVAL";
      default: return "";
    }
  }

  // Places no grant reaches, whatever the speaker: true with `d` filled.
  bool WhyNever(const std::string& path, const std::string& access, Denial& d) const {
    for (const auto& home : c_.homes)
      if (IsAtOrBelow(path, home)) {
        d.why = "a home directory (" + home + ")" +
                (c_.speaker == Speaker::kManifest
                     ? std::string(": homes are never granted to a module, whatever its manifest")
                     : std::string(", another user's or project's files and credentials: never suggested"));
        return true;
      }
    if (c_.registry != nullptr && WhyTool(path, access, d)) return true;
    if (const auto project = AnotherProject(path)) {
      d.why = "inside another project (" + *project + ", a git checkout the job was not given): never suggested";
      return true;
    }
    const bool gpu_node =
        IsAtOrBelow(path, "/dev/dri") || IsAtOrBelow(path, "/dev/kfd") || path.rfind("/dev/nvidia", 0) == 0;
    if (gpu_node && c_.policy->gpu() == GpuMode::kNone) {
      d.grant = Words(c_.speaker, Ask::kGpu);
      d.why = "a GPU device node: only the compute GPU grant allows it";
      return true;
    }
    if (IsAtOrBelow(path, "/dev")) {
      d.why = "a device: only null, zero, random, urandom and full (and the GPU nodes when granted) are ever granted";
      return true;
    }
    for (const char* state : {OARBANK_STATE_DIR, OARBANK_CONFIG_DIR})
      if (IsAtOrBelow(path, state)) {
        d.why = std::string("the agent's state (") + state + ") is never granted";
        return true;
      }
    for (const char* never : kNeverSuggested)
      if (IsAtOrBelow(path, never)) {
        d.why = std::string(never) == "/etc"
                    ? "a part of /etc not every user may read (the cage narrows /etc to its world-readable files): "
                      "never suggested"
                    : std::string("inside ") + never + ", the system's own: never suggested";
        return true;
      }
    return false;
  }

  // The checkout `path` lies in (the nearest directory above it holding a
  // .git, looked at without following a link), when it is not the job's:
  // no grant of the job lies in it and it lies in none.
  std::optional<std::string> AnotherProject(const std::string& path) const {
    for (std::string dir = path; dir.size() > 1; dir = dir.substr(0, std::max<size_t>(1, dir.rfind('/')))) {
      struct stat st;
      if (lstat((dir + "/.git").c_str(), &st) != 0) continue;
      for (const auto& g : c_.policy->grants())
        if (IsAtOrBelow(g.path, dir) || IsAtOrBelow(dir, g.path)) return std::nullopt;
      return dir;
    }
    return std::nullopt;
  }

  bool WhyTool(const std::string& path, const std::string& access, Denial& d) const {
    for (const auto& [id, tool] : c_.registry->tools) {
      const auto linux_paths = tool.paths.find(Platform::kLinux);
      if (linux_paths == tool.paths.end()) continue;
      for (const auto& raw : linux_paths->second) {
        const std::string canonical = Normalize(raw);
        if (!IsAtOrBelow(path, canonical)) continue;
        if (requested_.count(id) != 0 || IsWriteAccess(access)) {
          d.why = "inside tool \"" + id + "\" (" + canonical +
                  "), which is read and execute only: no grant makes it writable";
          return true;
        }
        d.grant = "tools = [{ id = \"" + id + "\" }]";
        d.why = "inside tool \"" + id + "\" of the operator's registry (" + canonical +
                "), which the manifest did not request: add it to [sandbox].tools";
        return true;
      }
    }
    return false;
  }

  // Inside one of the job's grants, refused for this access.
  bool WhyInGrant(const std::string& path, const std::string& access, Denial& d) const {
    for (const auto& g : c_.policy->grants()) {
      if (!IsAtOrBelow(path, g.path)) continue;
      if (g.access == Access::kReadWrite && access == "execute") {
        d.why = "a file in the " + g.field + " directory, where written files are not executable";
        if (c_.policy->role() == Role::kRunner && !c_.policy->exec_writable())
          d.grant = Words(c_.speaker, Ask::kExecWritable);
        return true;
      }
      if (g.access == Access::kReadExecute && IsWriteAccess(access)) {
        const bool worktree = c_.speaker == Speaker::kCage && g.field == "bundle";
        d.why = "inside " + (worktree ? std::string("the worktree") : g.field) + " (" + g.path +
                "), which is read and execute only";
        if (worktree) d.grant = Words(c_.speaker, Ask::kWritableWorktree);
        return true;
      }
    }
    for (const char* base : kBaseSystem)
      if (IsAtOrBelow(path, base) && IsWriteAccess(access)) {
        d.why = std::string("inside the base system (") + base + "), which no job may write";
        return true;
      }
    return false;
  }

  // Outside every grant, somewhere a grant may name: the directory (or
  // file) that would allow it, in the speaker's words.
  void SuggestPath(const std::string& path, const std::string& access, Denial& d) const {
    // Reading names the file or directory itself; writing, its directory.
    const bool dir_itself = access == "list" || access == "remove directory";
    const std::string parent = path.substr(0, std::max<size_t>(1, path.rfind('/')));
    const bool write = IsWriteAccess(access);
    const std::string dir = dir_itself || !write ? path : parent;
    if (dir == "/" || path == "/") {
      d.why = "the root directory: never suggested";
      return;
    }
    switch (c_.speaker) {
      case Speaker::kManifest:
        d.why =
            "outside the module's directories (bundle, runtime, work, data, tmp and requested tools): no grant can "
            "allow it";
        return;
      case Speaker::kPolicy:
        if (write && c_.policy->role() != Role::kRunner) {
          d.why = "outside the job's directories: only a runner has further writable directories (state)";
          return;
        }
        d.grant =
            write ? "\"state\": [\"" + dir + "\"]" : "\"tools\": [{\"id\": \"<name>\", \"paths\": [\"" + dir + "\"]}]";
        break;
      case Speaker::kCage:
        d.grant = write              ? "--state " + dir
                  : access == "list" ? "--read " + dir
                  : access == "read" ? "--read-file " + path
                                     : "--read " + parent;
        break;
    }
    d.why = "outside every directory the job was given";
  }

  uint64_t GrantedRights(const std::string& path) const {
    uint64_t rights = 0;
    for (const auto& rule : c_.plan->landlock.paths)
      if (IsAtOrBelow(path, Normalize(rule.path))) rights |= rule.access;
    return rights;
  }

  const ExplainContext& c_;
  std::set<std::string> requested_;
};

}  // namespace

namespace {

// A non-blocking connect (curl, Python with a timeout, Go) returns
// EINPROGRESS and learns how it ended from getsockopt(SO_ERROR) on the
// same socket (strace -y names it): that answer is the connect's.
std::vector<TraceCall> SettleConnects(const std::vector<TraceCall>& calls) {
  std::map<std::string, size_t> pending;  // "pid socket" -> its connect in `out`
  std::vector<TraceCall> out;
  for (const auto& c : calls) {
    // Keyed by process, not thread: Go's runtime asks SO_ERROR on another thread.
    const std::string key = c.args.empty() ? "" : std::to_string(c.tgid != 0 ? c.tgid : c.pid) + " " + c.args[0];
    if (c.name == "connect" && c.err == "EINPROGRESS") {
      pending[key] = out.size();
      out.push_back(c);
      continue;
    }
    if (c.name == "getsockopt" && c.args.size() > 3 && c.args[2] == "SO_ERROR") {
      const auto it = pending.find(key);
      if (it == pending.end()) continue;
      const std::string& value = c.args[3];  // "[ECONNREFUSED]"
      if (value.size() > 2 && value != "[0]") {
        out[it->second].err = value.substr(1, value.size() - 2);
        out[it->second].ret = -1;
      }
      pending.erase(it);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<Denial> ExplainDenials(const std::vector<TraceCall>& traced, const ExplainContext& context,
                                   std::vector<Denial>* others, size_t* dropped) {
  const std::vector<TraceCall> calls = SettleConnects(traced);
  Explainer explainer(context);
  std::vector<Denial> out;
  std::vector<Denial> not_cage;
  size_t dropped_here = 0;
  // The job chooses how many distinct refusals it makes: the list is bounded.
  const TraceCall* current = nullptr;
  auto add = [&dropped_here, &current](std::vector<Denial>& list, Denial d) {
    d.process = current->program;
    for (auto& existing : list)
      if (existing.kind == d.kind && existing.target == d.target && existing.access == d.access &&
          existing.denied_by == d.denied_by) {
        ++existing.count;
        return;
      }
    if (list.size() >= kMaxDenials) {
      ++dropped_here;
      return;
    }
    list.push_back(std::move(d));
  };
  for (const auto& call : calls) {
    current = &call;
    if (call.name == "SIGSYS") {
      Denial d;
      d.kind = "signal";
      d.syscall = call.args.empty() ? "?" : call.args[0];
      d.err = "SIGSYS";
      d.target = d.syscall + (call.args.size() > 1 ? " (" + call.args[1] + ")" : "");
      d.denied_by = "seccomp";
      d.why = "the cage kills this call (a foreign or x32 syscall ABI, or a killing row)";
      d.example = call.raw;
      add(out, std::move(d));
      continue;
    }
    // A supervised job's connect out of its own network namespace finds no
    // route; under egress-any the ruleset answers for a refused address (a
    // TCP reset, ECONNREFUSED; EPERM for a datagram).
    const bool sends = call.name == "connect" || call.name == "sendto" || call.name == "sendmsg";
    const bool unreachable =
        context.supervised && call.name == "connect" && (call.err == "ENETUNREACH" || call.err == "EHOSTUNREACH");
    const bool ruleset = context.policy->net().mode == NetMode::kEgressAny && sends &&
                         (call.err == "ECONNREFUSED" || call.err == "EPERM");
    if (unreachable || ruleset) {
      if (auto d = explainer.ExplainConnect(call)) add(out, std::move(*d));
      continue;
    }
    if (call.err != "EACCES" && call.err != "EPERM" && call.err != "EROFS") continue;
    const PathOp* op = nullptr;
    for (const auto& candidate : kPathOps)
      if (candidate.name == call.name) op = &candidate;
    if (call.err == "EROFS" && op == nullptr) continue;
    if (op != nullptr && static_cast<int>(call.args.size()) > op->path_arg) {
      const auto path = DecodeString(call.args[op->path_arg]);
      if (path) {
        // execveat(fd, "", AT_EMPTY_PATH) is a seccomp row, not a path.
        if (!path->empty()) {
          std::string base = call.cwd.empty() ? "/" : call.cwd;
          if (op->dirfd_arg >= 0 && static_cast<int>(call.args.size()) > op->dirfd_arg)
            if (auto dir = FdPath(call.args[op->dirfd_arg])) base = *dir;
          std::string access(op->access);
          if (access.empty())
            access =
                OpenAccess(call.args.size() > static_cast<size_t>(op->path_arg + 1) ? call.args[op->path_arg + 1] : "");
          if (access == "remove" && call.args.size() > 2 && call.args[2].find("AT_REMOVEDIR") != std::string::npos)
            access = "remove directory";
          const std::string full = (*path)[0] == '/' ? *path : base + "/" + *path;
          Denial d = explainer.ExplainPath(call, Normalize(full), access);
          const bool by_the_cage = d.denied_by != "file permissions";
          add(by_the_cage ? out : not_cage, std::move(d));
          continue;
        }
      }
    }
    std::optional<Denial> d;
    if (call.name == "socket" && call.err == "EPERM")
      d = explainer.ExplainSocket(call);
    else if (call.name == "connect" && call.err == "EACCES")
      d = explainer.ExplainConnect(call);
    else if (call.err == "EPERM")
      d = explainer.ExplainSyscall(call);
    if (d) add(out, std::move(*d));
  }
  if (others != nullptr) *others = std::move(not_cage);
  if (dropped != nullptr) *dropped = dropped_here;
  return out;
}

std::vector<std::string> HostHomes() {
  // /etc/passwd itself rather than getpwent: no NSS module is loaded into
  // the (possibly static) harness, and /home covers directory users.
  std::vector<std::string> homes = {"/root", "/home"};
  // The caller's own, wherever it lies.
  if (const char* home = getenv("HOME"); home != nullptr && home[0] == '/' && home[1] != '\0') homes.push_back(home);
  std::ifstream passwd("/etc/passwd");
  for (std::string line; std::getline(passwd, line);) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t at; (at = line.find(':', start)) != std::string::npos; start = at + 1)
      f.push_back(line.substr(start, at - start));
    f.push_back(line.substr(start));
    if (f.size() < 7) continue;
    const long uid = std::strtol(f[2].c_str(), nullptr, 10);
    const std::string& dir = f[5];
    if (uid < 1000 || uid == 65534 || dir.size() < 2 || dir[0] != '/') continue;
    if (std::find(homes.begin(), homes.end(), dir) == homes.end()) homes.push_back(dir);
  }
  // As the paths they are compared with: a /home that is a link to
  // /var/home is /var/home.
  std::vector<std::string> both = homes;
  for (const auto& home : homes)
    if (const std::string canonical = Normalize(home); canonical != home) both.push_back(canonical);
  return both;
}

}  // namespace oarbank
