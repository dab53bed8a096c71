#include "sandbox/policy/policy.h"

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/read_file.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/grant_path.h"
#include "sandbox/common/parse_error.h"
#include "sandbox/common/path_within.h"
#include "sandbox/policy/base_system.h"

namespace oarbank {
namespace {

using nlohmann::json;

constexpr size_t kMaxPolicyBytes = 1 << 20;

const char* TypeName(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  return v.type_name();
}

// Fails on the first key of `obj` not in `allowed`.
std::optional<Error> CheckKeys(const json& obj, const std::string& prefix,
                               std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items())
    if (auto error = UnknownKey(key, prefix, allowed, "field")) return error;
  return std::nullopt;
}

enum class Kind { kDir, kDirOrFile, kSocket };

// An absolute, glob-free path to an existing object, resolved to its
// canonical form with no link followed that a job could have planted
// (common/grant_path.h).
Expected<ResolvedPath> ParsePath(const json& v, const std::string& where, Kind kind,
                                 const ResolveOptions& options = {}) {
  if (!v.is_string()) return Bad(where, std::string("expected an absolute path string, got ") + TypeName(v));
  const std::string raw = v.get<std::string>();
  if (raw.empty() || raw[0] != '/') return Bad(where, "expected an absolute path, got \"" + raw + "\"");
  if (raw.find_first_of("*?[") != std::string::npos)
    return Bad(where, "globs are not allowed: a grant is a whole directory or a single file");
  if (raw.find('\0') != std::string::npos || raw.size() >= PATH_MAX) return Bad(where, "expected a valid path");
  auto resolved = ResolveGrantPath(raw, options);
  if (!resolved.ok() && resolved.error().where == kResourceShortage)
    return Error{kResourceShortage, where + ": " + resolved.error().what};
  if (!resolved.ok()) return Bad(where, resolved.error().what);
  const mode_t type = resolved.value().type;
  switch (kind) {
    case Kind::kDir:
      if (type != S_IFDIR) return Bad(where, "expected a directory: " + raw);
      break;
    case Kind::kDirOrFile:
      if (type != S_IFDIR && type != S_IFREG) return Bad(where, "expected a directory or a regular file: " + raw);
      break;
    case Kind::kSocket:
      if (type != S_IFSOCK) return Bad(where, "expected an existing unix socket: " + raw);
      break;
  }
  return resolved;
}

}  // namespace

// "host[:port]" with an optional leading "*." label; never an IP address.
std::optional<std::string> CheckAllowEntry(const std::string& entry) {
  std::string host = entry;
  const auto colon = entry.rfind(':');
  if (entry.find('[') != std::string::npos || std::count(entry.begin(), entry.end(), ':') > 1)
    return "IP addresses are not allowed, only host names";
  if (colon != std::string::npos) {
    host = entry.substr(0, colon);
    const std::string port = entry.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return "expected a port 1..65535 after ':'";
  }
  if (host.rfind("*.", 0) == 0) host = host.substr(2);
  if (host.empty() || host.size() > 253) return "expected host[:port]";
  if (host.find('*') != std::string::npos) return "'*' is allowed only as a leading \"*.\" label";
  bool all_numeric = true;
  std::stringstream labels(host);
  std::string label;
  size_t count = 0;
  while (std::getline(labels, label, '.')) {
    ++count;
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return "expected host[:port] with non-empty labels";
    for (char c : label) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-'))
        return "expected host[:port]: '" + std::string(1, c) + "' is not allowed in a host name";
      if (!std::isdigit(static_cast<unsigned char>(c))) all_numeric = false;
    }
  }
  if (host.back() == '.') return "expected host[:port] with non-empty labels";
  if (all_numeric || count == 0) return "IP addresses are not allowed, only host names";
  // inet_aton reads "127.1", "0x7f.1" and "2130706433" as addresses; no
  // top-level domain is numeric, so a numeric or hex last label is an address.
  const std::string last = host.substr(host.rfind('.') == std::string::npos ? 0 : host.rfind('.') + 1);
  if (std::all_of(last.begin(), last.end(), [](unsigned char c) { return std::isdigit(c) != 0; }) ||
      last.rfind("0x", 0) == 0)
    return "IP addresses are not allowed, only host names";
  if (last == "localhost") return "localhost names loopback, which is never reachable";
  return std::nullopt;
}

namespace {

Expected<int> ParsePort(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 65535)
    return Bad(where, "expected integer 1..65535");
  return static_cast<int>(v.get<long long>());
}

Expected<double> ParsePositive(const json& v, const std::string& where) {
  if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1e6)
    return Bad(where, "expected a positive number");
  return v.get<double>();
}

// Parses the text, refusing duplicate keys (nlohmann keeps the last one,
// which would let a second "net" silently override the first).
Expected<json> ParseJson(std::string_view text) {
  if (text.size() > kMaxPolicyBytes) return Bad("(policy)", "larger than 1 MiB");
  std::vector<std::set<std::string>> keys;
  std::optional<std::string> duplicate;
  json::parser_callback_t on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && !duplicate)
          duplicate = parsed.get<std::string>();
        break;
      case json::parse_event_t::array_start:
      case json::parse_event_t::array_end:
      case json::parse_event_t::value: break;
    }
    return true;
  };
  json doc = json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("(policy)", "expected a JSON object: the text is not valid JSON");
  if (duplicate) return Bad(KeyName(*duplicate), "duplicate field");
  if (!doc.is_object()) return Bad("(policy)", std::string("expected a JSON object, got ") + TypeName(doc));
  return doc;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kCoordinator: return "coordinator";
    case Role::kRunner: return "runner";
    case Role::kService: return "service";
    case Role::kProbe: return "probe";
  }
  return "?";
}

const char* NetModeName(NetMode mode) {
  switch (mode) {
    case NetMode::kNone: return "none";
    case NetMode::kEgressAllowlist: return "egress-allowlist";
    case NetMode::kEgressAny: return "egress-any";
  }
  return "?";
}

const char* IpcModeName(IpcMode mode) {
  switch (mode) {
    case IpcMode::kNone: return "none";
    case IpcMode::kJob: return "job";
  }
  return "?";
}

// One line whatever the policy held: control bytes in keys or paths are
// shown escaped, never written to the terminal.
int PolicyErrorExit(const Error& error) { return error.where == kResourceShortage ? kExitNotEnforced : kExitUsage; }

std::string PolicyErrorLine(const Error& error) {
  std::string line;
  const std::string text = error.where == kResourceShortage ? "sandbox: refused: resources: " + error.what
                                                            : "policy: " + error.where + ": " + error.what;
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      line += static_cast<char>(c);
    } else {
      char hex[8];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      line += hex;
    }
  }
  return line;
}

namespace {

// The top-level fields a policy may hold; the first unknown one is refused.
std::optional<Error> CheckTopLevelKeys(const json& doc) {
  return CheckKeys(doc, "",
                   {"contract", "role", "bundle", "runtime", "tools", "work", "data", "tmp", "state", "read_only",
                    "net", "broker", "devices", "exec_writable", "ipc", "debug", "limits"});
}

// Pseudo filesystems are never a grant: their files are the kernel's and
// other processes' (the base system already reads /proc and the CPU list).
std::optional<Error> CheckNotPseudo(const Grant& g) {
  for (const char* pseudo : {"/dev", "/proc", "/sys"})
    if (IsAtOrBelow(g.path, pseudo))
      return Bad(g.field, g.path + " is inside " + pseudo + ", which a grant may not name");
  return std::nullopt;
}

// A read-only carve-out lies strictly inside a writable grant (elsewhere
// nothing is writable to carve from), and no writable grant lies inside
// one (its bind would be made read-only with it).
std::optional<Error> CheckCarveOut(const Grant& r, const std::vector<Grant>& grants) {
  if (auto e = CheckNotPseudo(r)) return e;
  const bool inside = std::any_of(grants.begin(), grants.end(), [&](const Grant& w) {
    return w.access == Access::kReadWrite && IsStrictlyBelow(r.path, w.path);
  });
  if (!inside)
    return Bad(r.field, r.path +
                            " lies inside no writable grant (work, data, tmp, state): only a part of one "
                            "can be carved out read-only");
  for (const auto& w : grants)
    if (w.access == Access::kReadWrite && IsAtOrBelow(w.path, r.path))
      return Bad(r.field, "the writable grant " + w.field + " (" + w.path + ") lies inside " + r.path +
                              " and would become read-only");
  return std::nullopt;
}

// The base system's read+execute directories, as they resolve here, then
// the policy's read+execute grants.
std::vector<Grant> ReadExecuteGrants(const std::vector<Grant>& grants) {
  std::vector<Grant> read_execute;
  for (auto base : kBaseReadExecute) {
    char resolved[PATH_MAX];
    if (realpath(std::string(base).c_str(), resolved) != nullptr)
      read_execute.push_back(Grant{"base system " + std::string(base), resolved, true, Access::kReadExecute, FileId{}});
  }
  for (const auto& g : grants)
    if (g.access == Access::kReadExecute) read_execute.push_back(g);
  return read_execute;
}

// Landlock path rules only add rights: a writable grant inside a
// read+execute one (the policy's or the base system's) would inherit
// execute, and a read+execute grant inside a writable one would become
// writable. Refuse both rather than enforce less than the policy says.
std::optional<Error> CheckWritableNesting(const Grant& w, const std::vector<Grant>& read_execute, bool exec_writable) {
  for (const auto& r : read_execute) {
    const bool base = r.field.rfind("base system", 0) == 0;
    if (IsAtOrBelow(r.path, w.path))
      return Bad(base ? w.field : r.field, r.path + " (" + r.field + ") lies inside the writable grant " + w.field +
                                               " (" + w.path + ") and would become writable");
    if (IsAtOrBelow(w.path, r.path) && base)
      return Bad(w.field, w.path + " lies inside the base system (" + r.path + "), which no module may write");
    if (IsAtOrBelow(w.path, r.path) && !exec_writable)
      return Bad(w.field, w.path + " lies inside the read+execute grant " + r.field + " (" + r.path +
                              ") and would inherit execute (Landlock rules only add rights): move it out, "
                              "or set exec_writable");
  }
  return std::nullopt;
}

// The last stage, over the whole Policy: no grant or carve-out inside a
// pseudo filesystem, every carve-out inside a writable grant, and no grant
// of one kind nested in one of the other (or in the base system), unless
// exec_writable lets writable grants lie inside read+execute ones.
std::optional<Error> CheckGrantNesting(const Policy& p) {
  for (const auto& g : p.grants())
    if (auto e = CheckNotPseudo(g)) return e;
  for (const auto& r : p.read_only())
    if (auto e = CheckCarveOut(r, p.grants())) return e;
  const std::vector<Grant> read_execute = ReadExecuteGrants(p.grants());
  for (const auto& w : p.grants())
    if (w.access == Access::kReadWrite)
      if (auto e = CheckWritableNesting(w, read_execute, p.exec_writable())) return e;
  return std::nullopt;
}

// A system link followed while a path was resolved (grant_path.h) must not
// lie at or below any path the policy grants: a job given that path could
// have planted it, and a grant whose directory holds the system's links
// (/var) would make them a job's.
std::optional<Error> CheckLinksFollowed(const Policy& p,
                                        const std::vector<std::pair<std::string, std::string>>& links) {
  if (FaultSkipStep("grant-links")) return std::nullopt;
  for (const auto& g : p.grants())
    if (g.access == Access::kReadWrite && IsTrustedLinkDirectory(g.path))
      return Bad(g.field, g.path + " holds system links that grants follow, so it may not be writable");
  for (const auto& [field, link] : links)
    for (const auto* list : {&p.grants(), &p.read_only()})
      for (const auto& g : *list)
        if (IsAtOrBelow(link, g.path))
          return Bad(field, link + " is a symbolic link inside " + g.field + " (" + g.path +
                                "), which a job is given: it could have planted it; name the directory it leads to");
  return std::nullopt;
}

}  // namespace

// The Policy being parsed and the stages that fill it, one per group of
// fields, each returning the first error it finds. Policy's fields are
// private and this struct is its one friend; it is defined here only.
struct PolicyBuilder {
  explicit PolicyBuilder(const json& document) : doc(document) {}

  const json& doc;
  Policy p;

  // Links followed while resolving a path, each with the field that named
  // the path; CheckLinksFollowed refuses any that lies inside a grant.
  std::vector<std::pair<std::string, std::string>> links;

  Grant MakeGrant(std::string field, const ResolvedPath& path, Access access) {
    for (const auto& link : path.links) links.emplace_back(field, link);
    return Grant{std::move(field), path.path, path.type == S_IFDIR, access, path.inode};
  }
  void AddGrant(std::string field, const ResolvedPath& path, Access access) {
    p.grants_.push_back(MakeGrant(std::move(field), path, access));
  }

  std::optional<Error> ParseContractAndRole();
  std::optional<Error> CheckFieldsForRole();
  std::optional<Error> ParseBundleAndRuntime();
  std::optional<Error> ParseTools();
  std::optional<Error> ParseTool(const json& t, const std::string& at, std::set<std::string>& ids);
  std::optional<Error> ParseWritableDirs();
  std::optional<Error> ParseReadOnly();
  std::optional<Error> ParseNet();
  std::optional<Error> ParseIpc();
  std::optional<Error> ParseDebug();
  std::optional<Error> ParseNetAllowlist(const json& net);
  std::optional<Error> ParseBroker();
  std::optional<Error> ParseDevices();
  std::optional<Error> ParseExecWritable();
  std::optional<Error> ParseLimits();
};

// contract and role first: everything else depends on them.
std::optional<Error> PolicyBuilder::ParseContractAndRole() {
  if (!doc.contains("contract")) return Bad("contract", "missing: expected 1");
  if (!doc["contract"].is_number_integer() || doc["contract"].get<long long>() != 1)
    return Bad("contract", "expected 1 (the only contract version this launcher knows)");
  p.contract_ = 1;

  if (!doc.contains("role")) return Bad("role", "missing: expected one of coordinator, runner, service, probe");
  const json& role = doc["role"];
  const std::string role_name = role.is_string() ? role.get<std::string>() : "";
  if (role_name == "coordinator")
    p.role_ = Role::kCoordinator;
  else if (role_name == "runner")
    p.role_ = Role::kRunner;
  else if (role_name == "service")
    p.role_ = Role::kService;
  else if (role_name == "probe")
    p.role_ = Role::kProbe;
  else
    return Bad("role", "expected one of coordinator, runner, service, probe");
  return std::nullopt;
}

// Which role may have which directory (the module contract, "What every
// module process may touch").
std::optional<Error> PolicyBuilder::CheckFieldsForRole() {
  const bool runner = p.role_ == Role::kRunner;
  const bool may_have_tools = p.role_ != Role::kCoordinator;
  if (doc.contains("work") && !runner)
    return Bad("work", std::string("a ") + RoleName(p.role_) + " has no work directory (runner only)");
  if (doc.contains("tools") && !may_have_tools) return Bad("tools", "a coordinator may not use host tools");
  if (doc.contains("state") && !runner)
    return Bad("state", std::string("a ") + RoleName(p.role_) + " has no state directories (runner only)");
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseBundleAndRuntime() {
  if (!doc.contains("bundle")) return Bad("bundle", "missing: expected an absolute path to a directory");
  auto bundle = ParsePath(doc["bundle"], "bundle", Kind::kDir);
  if (!bundle.ok()) return bundle.error();
  p.bundle_ = bundle.value().path;
  AddGrant("bundle", bundle.value(), Access::kReadExecute);

  if (doc.contains("runtime")) {
    auto runtime = ParsePath(doc["runtime"], "runtime", Kind::kDirOrFile);
    if (!runtime.ok()) return runtime.error();
    p.runtime_ = runtime.value().path;
    AddGrant("runtime", runtime.value(), Access::kReadExecute);
  }
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseTools() {
  if (!doc.contains("tools")) return std::nullopt;
  const json& tools = doc["tools"];
  if (!tools.is_array()) return Bad("tools", std::string("expected an array, got ") + TypeName(tools));
  std::set<std::string> ids;
  for (size_t i = 0; i < tools.size(); ++i)
    if (auto e = ParseTool(tools[i], "tools[" + std::to_string(i) + "]", ids)) return e;
  return std::nullopt;
}

// One tools[i]: its id (unique among `ids`), trust, and paths, each a grant.
std::optional<Error> PolicyBuilder::ParseTool(const json& t, const std::string& at, std::set<std::string>& ids) {
  if (!t.is_object()) return Bad(at, std::string("expected an object, got ") + TypeName(t));
  if (auto e = CheckKeys(t, at + ".", {"id", "paths", "trust"})) return e;
  Tool tool;
  if (!t.contains("id") || !t["id"].is_string() || t["id"].get<std::string>().empty())
    return Bad(at + ".id", "expected a non-empty string");
  tool.id = t["id"].get<std::string>();
  if (!ids.insert(tool.id).second) return Bad(at + ".id", "duplicate tool id \"" + tool.id + "\"");
  if (t.contains("trust")) {
    if (!t["trust"].is_string() || t["trust"].get<std::string>() != "code-exec")
      return Bad(at + ".trust", "expected \"code-exec\" (or no trust field)");
    tool.code_exec = true;
  }
  if (!t.contains("paths") || !t["paths"].is_array() || t["paths"].empty())
    return Bad(at + ".paths", "expected a non-empty array of absolute paths");
  for (size_t j = 0; j < t["paths"].size(); ++j) {
    const std::string where = at + ".paths[" + std::to_string(j) + "]";
    auto path = ParsePath(t["paths"][j], where, Kind::kDirOrFile);
    if (!path.ok()) return path.error();
    tool.paths.push_back(path.value().path);
    AddGrant(where, path.value(), Access::kReadExecute);
  }
  p.tools_.push_back(std::move(tool));
  return std::nullopt;
}

// work, data, tmp and state, in that order: tmp must lie inside work (a
// runner's) or data (every other role's), so those come first.
std::optional<Error> PolicyBuilder::ParseWritableDirs() {
  for (const char* field : {"work", "data"}) {
    if (!doc.contains(field)) continue;
    auto dir = ParsePath(doc[field], field, Kind::kDir);
    if (!dir.ok()) return dir.error();
    (std::string(field) == "work" ? p.work_ : p.data_) = dir.value().path;
    AddGrant(field, dir.value(), Access::kReadWrite);
  }

  if (doc.contains("tmp")) {
    auto tmp = ParsePath(doc["tmp"], "tmp", Kind::kDir);
    if (!tmp.ok()) return tmp.error();
    const bool runner = p.role_ == Role::kRunner;
    const char* home = runner ? "work" : "data";
    const auto& parent = runner ? p.work_ : p.data_;
    if (!parent || !IsStrictlyBelow(tmp.value().path, *parent))
      return Bad("tmp", std::string("expected a directory inside ") + home + " (a " + RoleName(p.role_) +
                            "'s private tmp lives there)");
    p.tmp_ = tmp.value().path;
    AddGrant("tmp", tmp.value(), Access::kReadWrite);
  }

  if (doc.contains("state")) {
    const json& state = doc["state"];
    if (!state.is_array()) return Bad("state", std::string("expected an array of directories, got ") + TypeName(state));
    for (size_t i = 0; i < state.size(); ++i) {
      const std::string where = "state[" + std::to_string(i) + "]";
      auto dir = ParsePath(state[i], where, Kind::kDir);
      if (!dir.ok()) return dir.error();
      p.state_.push_back(dir.value().path);
      AddGrant(where, dir.value(), Access::kReadWrite);
    }
  }
  return std::nullopt;
}

// The read_only carve-outs; where they may lie is checked with the other
// grants, in CheckGrantNesting.
std::optional<Error> PolicyBuilder::ParseReadOnly() {
  if (!doc.contains("read_only")) return std::nullopt;
  const json& ro = doc["read_only"];
  if (!ro.is_array()) return Bad("read_only", std::string("expected an array of paths, got ") + TypeName(ro));
  // A carve-out is reached inside its writable grant without crossing a
  // mount point there (RESOLVE_NO_XDEV below the grant).
  ResolveOptions options;
  for (const auto& g : p.grants_)
    if (g.access == Access::kReadWrite) options.no_xdev_below.push_back(g.path);
  for (size_t i = 0; i < ro.size(); ++i) {
    const std::string where = "read_only[" + std::to_string(i) + "]";
    auto path = ParsePath(ro[i], where, Kind::kDirOrFile, options);
    if (!path.ok()) return path.error();
    p.read_only_.push_back(MakeGrant(where, path.value(), Access::kReadExecute));
  }
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseNet() {
  if (!doc.contains("net")) return std::nullopt;
  const json& net = doc["net"];
  if (!net.is_object()) return Bad("net", std::string("expected an object, got ") + TypeName(net));
  if (auto e = CheckKeys(net, "net.", {"mode", "allow", "proxy_port"})) return e;
  const std::string mode = net.contains("mode") && net["mode"].is_string() ? net["mode"].get<std::string>() : "";
  if (mode == "none")
    p.net_.mode = NetMode::kNone;
  else if (mode == "egress-allowlist")
    p.net_.mode = NetMode::kEgressAllowlist;
  else if (mode == "egress-any")
    p.net_.mode = NetMode::kEgressAny;
  else
    return Bad("net.mode", "expected one of none, egress-allowlist, egress-any");
  const bool allowlist = p.net_.mode == NetMode::kEgressAllowlist;
  if (allowlist && !net.contains("allow")) return Bad("net.allow", "missing: egress-allowlist needs at least one host");
  if (allowlist && !net.contains("proxy_port")) return Bad("net.proxy_port", "missing: expected integer 1..65535");
  if (!allowlist && net.contains("allow")) return Bad("net.allow", "only allowed with mode egress-allowlist");
  if (!allowlist && net.contains("proxy_port")) return Bad("net.proxy_port", "only allowed with mode egress-allowlist");
  if (allowlist) return ParseNetAllowlist(net);
  return std::nullopt;
}

// net.allow (lower-cased, each entry checked) and net.proxy_port, both
// present: mode egress-allowlist.
std::optional<Error> PolicyBuilder::ParseNetAllowlist(const json& net) {
  const json& allow = net["allow"];
  if (!allow.is_array() || allow.empty()) return Bad("net.allow", "expected a non-empty array of host[:port]");
  for (size_t i = 0; i < allow.size(); ++i) {
    const std::string where = "net.allow[" + std::to_string(i) + "]";
    if (!allow[i].is_string()) return Bad(where, "expected a string host[:port]");
    std::string entry = allow[i].get<std::string>();
    std::transform(entry.begin(), entry.end(), entry.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (auto why = CheckAllowEntry(entry)) return Bad(where, *why);
    p.net_.allow.push_back(entry);
  }
  auto port = ParsePort(net["proxy_port"], "net.proxy_port");
  if (!port.ok()) return port.error();
  p.net_.proxy_port = port.value();
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseBroker() {
  if (!doc.contains("broker")) return std::nullopt;
  auto broker = ParsePath(doc["broker"], "broker", Kind::kSocket);
  if (!broker.ok()) return broker.error();
  for (const auto& link : broker.value().links) links.emplace_back("broker", link);
  p.broker_ = broker.value().path;
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseDevices() {
  if (!doc.contains("devices")) return std::nullopt;
  const json& devices = doc["devices"];
  if (!devices.is_object()) return Bad("devices", std::string("expected an object, got ") + TypeName(devices));
  if (auto e = CheckKeys(devices, "devices.", {"gpu"})) return e;
  if (devices.contains("gpu")) {
    const json& gpu = devices["gpu"];
    const std::string g = gpu.is_string() ? gpu.get<std::string>() : "";
    if (g == "compute")
      p.gpu_ = GpuMode::kCompute;
    else if (g == "none")
      p.gpu_ = GpuMode::kNone;
    else
      return Bad("devices.gpu", "expected \"compute\" or \"none\"");
  }
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseExecWritable() {
  if (!doc.contains("exec_writable")) return std::nullopt;
  if (!doc["exec_writable"].is_boolean()) return Bad("exec_writable", "expected true or false");
  p.exec_writable_ = doc["exec_writable"].get<bool>();
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseIpc() {
  if (!doc.contains("ipc")) return std::nullopt;
  const json& ipc = doc["ipc"];
  const std::string mode = ipc.is_string() ? ipc.get<std::string>() : "";
  if (mode == "none") return std::nullopt;
  if (mode != "job") return Bad("ipc", "expected \"none\" or \"job\"");
  if (p.net_.mode == NetMode::kEgressAny)
    return Bad("ipc",
               "\"job\" cannot be combined with net.mode egress-any: that job network's ruleset decides every "
               "address of the job, its loopback included");
  p.ipc_ = IpcMode::kJob;
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseDebug() {
  if (!doc.contains("debug")) return std::nullopt;
  if (!doc["debug"].is_boolean()) return Bad("debug", "expected true or false");
  p.debug_ = doc["debug"].get<bool>();
  return std::nullopt;
}

std::optional<Error> PolicyBuilder::ParseLimits() {
  if (!doc.contains("limits")) return std::nullopt;
  const json& limits = doc["limits"];
  if (!limits.is_object()) return Bad("limits", std::string("expected an object, got ") + TypeName(limits));
  if (auto e = CheckKeys(limits, "limits.", {"mem_gb", "cpus", "pids"})) return e;
  if (limits.contains("mem_gb")) {
    auto v = ParsePositive(limits["mem_gb"], "limits.mem_gb");
    if (!v.ok()) return v.error();
    p.limits_.mem_gb = v.value();
  }
  if (limits.contains("cpus")) {
    auto v = ParsePositive(limits["cpus"], "limits.cpus");
    if (!v.ok()) return v.error();
    p.limits_.cpus = v.value();
  }
  if (limits.contains("pids")) {
    const json& v = limits["pids"];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > kMaxPidsMax)
      return Bad("limits.pids", "expected an integer 1.." + std::to_string(kMaxPidsMax));
    p.limits_.pids = v.get<uint64_t>();
    p.limits_.pids_set = true;
  }
  return std::nullopt;
}

// The stages run in this order, and each stops at its first error, so the
// error a bad policy gets is always the same one (the tests pin it).
Expected<Policy> ParsePolicy(std::string_view json_text) {
  auto parsed = ParseJson(json_text);
  if (!parsed.ok()) return parsed.error();
  if (auto e = CheckTopLevelKeys(parsed.value())) return *e;
  PolicyBuilder b(parsed.value());
  if (auto e = b.ParseContractAndRole()) return *e;
  if (auto e = b.CheckFieldsForRole()) return *e;
  if (auto e = b.ParseBundleAndRuntime()) return *e;
  if (auto e = b.ParseTools()) return *e;
  if (auto e = b.ParseWritableDirs()) return *e;
  if (auto e = b.ParseReadOnly()) return *e;
  if (auto e = b.ParseNet()) return *e;
  if (auto e = b.ParseBroker()) return *e;
  if (auto e = b.ParseDevices()) return *e;
  if (auto e = b.ParseExecWritable()) return *e;
  if (auto e = b.ParseIpc()) return *e;
  if (auto e = b.ParseDebug()) return *e;
  if (auto e = b.ParseLimits()) return *e;
  if (auto e = CheckGrantNesting(b.p)) return *e;
  if (auto e = CheckLinksFollowed(b.p, b.links)) return *e;
  return std::move(b.p);
}

Expected<Policy> LoadPolicyFile(const std::string& path) {
  std::string why;
  const auto text = ReadFileUpTo(path, kMaxPolicyBytes, &why);
  // The reader's `why` is strerror's text: a shortage of descriptors or
  // memory is the host's, not the file's.
  for (int err : {EMFILE, ENFILE, ENOMEM})
    if (!text && why == strerror(err)) return Error{kResourceShortage, path + ": " + why};
  if (!text) return Bad(path, "cannot read the policy file: " + why);
  return ParsePolicy(*text);
}

}  // namespace oarbank
