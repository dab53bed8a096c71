#include "harness/module_trace.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "sandbox/common/install_paths.h"
#include "sandbox/common/path_within.h"
#include "sandbox/host/landlock_abi.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

// Splits strace's argument list at top-level commas.
std::vector<std::string> SplitArgs(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      cur += c;
      if (c == '\\' && i + 1 < s.size())
        cur += s[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '(':
      case '[':
      case '{':
      case '<': ++depth; break;
      case ')':
      case ']':
      case '}':
      case '>': --depth; break;
      default: break;
    }
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      if (i + 1 < s.size() && s[i + 1] == ' ') ++i;
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// "\"/a\\x62\"" -> "/ab"; nothing when the token is not a string.
std::optional<std::string> DecodeString(const std::string& token) {
  if (token.empty() || token[0] != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i < token.size(); ++i) {
    char c = token[i];
    if (c == '"') return out;
    if (c != '\\' || i + 1 >= token.size()) {
      out += c;
      continue;
    }
    c = token[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'v': out += '\v'; break;
      case 'f': out += '\f'; break;
      case 'x':
        if (i + 2 < token.size()) {
          out += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
          i += 2;
        }
        break;
      default:
        if (c >= '0' && c <= '7') {
          size_t n = 0;
          int v = 0;
          while (n < 3 && i < token.size() && token[i] >= '0' && token[i] <= '7') v = v * 8 + (token[i++] - '0'), ++n;
          --i;
          out += static_cast<char>(v);
        } else {
          out += c;
        }
    }
  }
  return out;
}

// "AT_FDCWD</work>" or "3</dir>" -> "/work"; strace -y prints the path of a
// directory fd (and the cwd for AT_FDCWD).
std::optional<std::string> FdPath(const std::string& token) {
  const auto lt = token.find('<');
  const auto gt = token.rfind('>');
  if (lt == std::string::npos || gt == std::string::npos || gt <= lt + 1) return std::nullopt;
  const std::string p = token.substr(lt + 1, gt - lt - 1);
  if (p.empty() || p[0] != '/') return std::nullopt;
  return p;
}

std::string Normalize(const std::string& path) {
  std::string lexical = fs::path(path).lexically_normal().string();
  if (lexical.size() > 1 && lexical.back() == '/') lexical.pop_back();
  char resolved[PATH_MAX];
  if (realpath(lexical.c_str(), resolved) != nullptr) return resolved;
  const fs::path p(lexical);
  if (realpath(p.parent_path().c_str(), resolved) != nullptr) return (fs::path(resolved) / p.filename()).string();
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

class Explainer {
 public:
  explicit Explainer(const ExplainContext& c) : c_(c) {
    const Manifest& m = *c.manifest;
    for (const auto& t : m.sandbox.tools) requested_.insert(t.id);
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
    if (read_only && in_writable_grant) {
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
    const SandboxRequests& s = c_.manifest->sandbox;
    for (const auto& home : c_.homes)
      if (IsAtOrBelow(path, home)) {
        d.why = "a home directory (" + home + "): homes are never granted to a module, whatever its manifest";
        return d;
      }
    if (c_.registry != nullptr)
      for (const auto& [id, tool] : c_.registry->tools) {
        const auto linux_paths = tool.paths.find(Platform::kLinux);
        if (linux_paths == tool.paths.end()) continue;
        for (const auto& raw : linux_paths->second) {
          const std::string canonical = Normalize(raw);
          if (!IsAtOrBelow(path, canonical)) continue;
          if (requested_.count(id) != 0 || IsWriteAccess(access)) {
            d.why = "inside tool \"" + id + "\" (" + canonical +
                    "), which is read and execute only: no grant makes it writable";
            return d;
          }
          d.grant = "tools = [{ id = \"" + id + "\" }]";
          d.why = "inside tool \"" + id + "\" of the operator's registry (" + canonical +
                  "), which the manifest did not request: add it to [sandbox].tools";
          return d;
        }
      }
    const bool gpu_node =
        IsAtOrBelow(path, "/dev/dri") || IsAtOrBelow(path, "/dev/kfd") || path.rfind("/dev/nvidia", 0) == 0;
    if (gpu_node && s.gpu == GpuMode::kNone) {
      d.grant = "devices = { gpu = \"compute\" }";
      d.why = "a GPU device node: only devices.gpu = \"compute\" grants it";
      return d;
    }
    if (IsAtOrBelow(path, "/dev")) {
      d.why =
          "a device: only null, zero, random, urandom and full (and the GPU nodes with devices.gpu) are ever granted";
      return d;
    }
    for (const auto& g : c_.policy->grants()) {
      if (!IsAtOrBelow(path, g.path)) continue;
      if (g.access == Access::kReadWrite && access == "execute") {
        if (c_.policy->role() == Role::kRunner && !c_.policy->exec_writable()) {
          d.grant = "exec_writable = true";
          d.why = "a file in the " + g.field +
                  " directory, where written files are not executable unless exec_writable = true";
        } else {
          d.why = "a file in the " + g.field + " directory, where only a runner with exec_writable = true may execute";
        }
        return d;
      }
      if (g.access == Access::kReadExecute && IsWriteAccess(access)) {
        d.why = "inside " + g.field + " (" + g.path +
                "), which is read and execute only: write into work, data or tmp ($TMPDIR)";
        return d;
      }
    }
    for (const auto& rule : c_.plan->landlock.paths)
      if (rule.source.rfind("base system", 0) == 0 && IsAtOrBelow(path, rule.path) && IsWriteAccess(access)) {
        d.why = "inside the base system (" + rule.path +
                "), which no module may write: write into work, data or tmp ($TMPDIR)";
        return d;
      }
    for (const char* state : {OARBANK_STATE_DIR, OARBANK_CONFIG_DIR, "/run", "/var/run"})
      if (IsAtOrBelow(path, state)) {
        d.why = std::string("the agent's and the system's state (") + state + ") is never granted";
        return d;
      }
    if (IsAtOrBelow(path, "/etc")) {
      d.why =
          "a part of /etc that not every user may read (the cage narrows /etc to its world-readable files): never "
          "granted";
      return d;
    }
    d.why =
        "outside the module's directories (bundle, runtime, work, data, tmp and requested tools): no grant can allow "
        "it";
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
    const SandboxRequests& s = c_.manifest->sandbox;
    if (family == "AF_UNIX") {
      if (s.containers.empty()) d.grant = "containers = [{ image = \"...@sha256:...\", platform = \"linux/amd64\" }]";
      d.why =
          "no unix socket but the job's broker endpoint, which [sandbox].containers grants (no other socket, pipe or "
          "D-Bus ever)";
      return d;
    }
    if (family == "AF_INET" || family == "AF_INET6") {
      if (s.net == NetMode::kNone) {
        d.grant = "net = { mode = \"egress-allowlist\", allow = [\"<host>\"] }";
        d.why =
            "net.mode = \"none\": no network; egress-allowlist reaches the listed hosts through the agent's proxy "
            "($HTTPS_PROXY)";
      } else {
        d.why =
            "under egress-allowlist only TCP streams to the agent's proxy: UDP, raw and other protocols never "
            "(egress-any "
            "would, but Linux cannot enforce it)";
      }
      return d;
    }
    d.why = "only unix, IPv4 and IPv6 sockets exist in the cage (" + family + " is never granted)";
    return d;
  }

  std::optional<Denial> ExplainConnect(const TraceCall& call) {
    Denial d;
    d.kind = "connect";
    d.syscall = call.name;
    d.err = call.err;
    d.denied_by = "landlock";
    d.example = call.raw;
    const std::string sa = call.args.size() > 1 ? call.args[1] : "";
    auto field = [&](const std::string& key) -> std::string {
      const auto at = sa.find(key);
      if (at == std::string::npos) return "";
      const auto start = at + key.size();
      const auto end = sa.find_first_of(")\",}", start);
      return sa.substr(start, end == std::string::npos ? std::string::npos : end - start);
    };
    if (sa.find("AF_UNIX") != std::string::npos) {
      d.target = "unix:" + field("sun_path=\"");
      d.why = "no unix socket but the job's broker endpoint";
      if (c_.manifest->sandbox.containers.empty())
        d.grant = "containers = [{ image = \"...@sha256:...\", platform = \"linux/amd64\" }]";
      return d;
    }
    std::string addr = field("inet_addr(\"");
    if (addr.empty()) addr = field("inet_pton(AF_INET6, \"");
    const std::string port = field("htons(");
    d.target = addr + ":" + port;
    const bool loopback = addr.rfind("127.", 0) == 0 || addr == "::1" || addr.rfind("::ffff:127.", 0) == 0;
    const bool link_local = addr.rfind("169.254.", 0) == 0 || addr.rfind("fe80:", 0) == 0;
    if (loopback || link_local) {
      d.why = std::string("never ") + (loopback ? "loopback" : "link-local") +
              ", whatever the grants (only the agent's proxy port is reachable)";
      return d;
    }
    d.why = "only the agent's proxy port (" + std::to_string(c_.policy->net().proxy_port) +
            ") is reachable: connect through $HTTPS_PROXY, with the host in net.allow";
    d.grant = "net.allow = [\"<host>:" + port + "\"] (through the proxy)";
    return d;
  }

  std::optional<Denial> ExplainSyscall(const TraceCall& call) {
    for (const auto& rule : c_.plan->seccomp) {
      if (rule.syscall != call.name) continue;
      Denial d;
      d.kind = call.name == "listen" || call.name == "bind" ? "listen" : "syscall";
      d.syscall = call.name;
      d.err = call.err;
      d.denied_by = "seccomp";
      d.target = call.name;
      d.example = call.raw;
      d.why = rule.why;
      switch (rule.when) {
        case When::kExecWritableDeny:
          if (c_.policy->role() == Role::kRunner) d.grant = "exec_writable = true";
          break;
        case When::kNoBroker: d.grant = "containers = [...] (the broker endpoint)"; break;
        case When::kNetNone: d.grant = "net = { mode = \"egress-allowlist\", allow = [\"<host>\"] }"; break;
        case When::kNetEgressAllowlist:
        case When::kInetSockets:
        case When::kNoJobIpc:
        case When::kNoDebug:
        case When::kAlways: break;
      }
      if (d.grant.empty()) d.why += ": always refused, no grant can allow it";
      return d;
    }
    return std::nullopt;
  }

 private:
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

std::optional<TraceCall> ParseTraceLine(const std::string& line, int pid) {
  TraceCall call;
  call.pid = pid;
  call.raw = line;
  if (line.rfind("--- SIGSYS ", 0) == 0) {
    call.name = "SIGSYS";
    const auto at = line.find("si_syscall=");
    if (at != std::string::npos) {
      const auto end = line.find_first_of(",}", at);
      call.args.push_back(line.substr(at + 11, end - at - 11));
    }
    const auto arch = line.find("si_arch=");
    if (arch != std::string::npos) {
      const auto end = line.find_first_of(",}", arch);
      call.args.push_back(line.substr(arch + 8, end - arch - 8));
    }
    call.err = "SIGSYS";
    return call;
  }
  // "name(args) = ret", where strace pads short calls with spaces before '='.
  const auto open = line.find('(');
  const auto eq_sign = line.rfind(" = ");
  if (open == std::string::npos || eq_sign == std::string::npos || eq_sign < open) return std::nullopt;
  const auto eq = line.rfind(')', eq_sign);
  if (eq == std::string::npos || eq < open ||
      line.find_first_not_of(' ', eq + 1) != eq_sign + 1 /* '=' right after the padding */)
    return std::nullopt;
  call.name = line.substr(0, open);
  if (call.name.empty() || !std::all_of(call.name.begin(), call.name.end(),
                                        [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }))
    return std::nullopt;
  call.args = SplitArgs(line.substr(open + 1, eq - open - 1));
  const std::string ret = line.substr(eq_sign + 3);
  if (ret.empty() || ret[0] == '?') return call;
  call.ret = std::strtoll(ret.c_str(), nullptr, 10);
  if (call.ret < 0) {
    const auto space = ret.find(' ');
    if (space != std::string::npos) {
      const auto end = ret.find(' ', space + 1);
      call.err = ret.substr(space + 1, end == std::string::npos ? std::string::npos : end - space - 1);
    }
  }
  return call;
}

ModuleTrace ReadModuleTrace(const std::string& prefix) {
  ModuleTrace out;
  const fs::path dir = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + ".";
  std::map<int, std::vector<TraceCall>> per_pid;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + stem.size());
    if (pid <= 0) continue;
    std::ifstream in(entry.path());
    std::vector<TraceCall>& calls = per_pid[pid];
    for (std::string line; std::getline(in, line);)
      if (auto call = ParseTraceLine(line, pid)) calls.push_back(std::move(*call));
  }
  std::set<int> children;
  for (const auto& [pid, calls] : per_pid)
    for (const auto& c : calls)
      if ((c.name == "clone" || c.name == "clone3" || c.name == "fork" || c.name == "vfork") && c.ret > 0)
        children.insert(static_cast<int>(c.ret));
  // Walk from the launcher (the one process nobody forked), carrying "is
  // the module" across each fork.
  // Only the launcher's own process becomes the module (by its second
  // exec); what the launcher forked before that never does.
  // The working directory is carried the same way: strace -y shows it in
  // every AT_FDCWD argument, and a child starts in its parent's.
  std::function<void(int, bool, bool, std::string)> walk = [&](int pid, bool module, bool is_launcher,
                                                               std::string cwd) {
    const auto it = per_pid.find(pid);
    if (it == per_pid.end()) return;
    int execs = 0;
    for (auto& c : it->second) {
      for (const auto& arg : c.args)
        if (arg.rfind("AT_FDCWD<", 0) == 0)
          if (auto dir = FdPath(arg)) cwd = *dir;
      if (c.name == "chdir" && c.ret == 0 && c.err.empty() && !c.args.empty())
        if (auto dir = DecodeString(c.args[0])) cwd = (!dir->empty() && (*dir)[0] == '/') ? *dir : cwd + "/" + *dir;
      c.cwd = cwd;
      if (!module && is_launcher && (c.name == "execve" || c.name == "execveat") && c.ret == 0 && c.err.empty()) {
        if (++execs >= 2) module = out.module_ran = true;
        continue;
      }
      if (module) out.calls.push_back(c);
      if ((c.name == "clone" || c.name == "clone3" || c.name == "fork" || c.name == "vfork") && c.ret > 0)
        walk(static_cast<int>(c.ret), module, false, cwd);
    }
  };
  for (const auto& [pid, calls] : per_pid)
    if (children.count(pid) == 0) walk(pid, false, true, "/");
  return out;
}

std::vector<Denial> ExplainDenials(const std::vector<TraceCall>& calls, const ExplainContext& context,
                                   std::vector<Denial>* others) {
  Explainer explainer(context);
  std::vector<Denial> out;
  std::vector<Denial> not_cage;
  auto add = [](std::vector<Denial>& list, Denial d) {
    for (auto& existing : list)
      if (existing.kind == d.kind && existing.target == d.target && existing.access == d.access &&
          existing.denied_by == d.denied_by) {
        ++existing.count;
        return;
      }
    list.push_back(std::move(d));
  };
  for (const auto& call : calls) {
    if (call.name == "SIGSYS") {
      Denial d;
      d.kind = "signal";
      d.syscall = call.args.empty() ? "?" : call.args[0];
      d.err = "SIGSYS";
      d.target = d.syscall + (call.args.size() > 1 ? " (" + call.args[1] + ")" : "");
      d.denied_by = "seccomp";
      d.why = "the cage kills this call (a foreign or x32 syscall ABI, or a killing row): no grant can allow it";
      d.example = call.raw;
      add(out, std::move(d));
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
  return out;
}

std::vector<std::string> HostHomes() {
  // /etc/passwd itself rather than getpwent: no NSS module is loaded into
  // the (possibly static) harness, and /home covers directory users.
  std::vector<std::string> homes = {"/root", "/home"};
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
  return homes;
}

nlohmann::ordered_json DenialJson(const Denial& d) {
  return {{"kind", d.kind},
          {"syscall", d.syscall},
          {"errno", d.err},
          {"target", d.target},
          {"access", d.access},
          {"denied_by", d.denied_by},
          {"grant", d.grant.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.grant)},
          {"explanation", d.why},
          {"count", d.count},
          {"example", d.example}};
}

std::string DenialText(const Denial& d) {
  std::string what;
  if (d.kind == "file")
    what = d.access + " " + d.target;
  else if (d.kind == "socket")
    what = "socket(" + d.target + ")";
  else if (d.kind == "connect")
    what = "connect to " + d.target;
  else if (d.kind == "signal")
    what = "syscall " + d.target + " killed";
  else
    what = "syscall " + d.target;
  std::string line = what + " (" + d.syscall + ", " + d.err + ", " + d.denied_by + ")" +
                     (d.count > 1 ? " x" + std::to_string(d.count) : "") + "\n      " + d.why;
  line += d.grant.empty() ? "\n      grant: none can allow it" : "\n      grant that would allow it: " + d.grant;
  return line;
}

}  // namespace oarbank
