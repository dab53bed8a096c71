#include "sandbox/manifest/manifest.h"

#include "sandbox/common/parse_error.h"
#include "sandbox/common/read_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace oarbank {
namespace {

constexpr size_t kMaxManifestBytes = 1 << 20;

std::string Index(const std::string& at, size_t i) { return at + "[" + std::to_string(i) + "]"; }

const char* TypeName(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
  }
  return "?";
}

// Fails on the first key of `table` not in `known`.
std::optional<Error> CheckKeys(const toml::table& table, const std::string& prefix,
                               std::initializer_list<std::string_view> known) {
  for (auto&& [key, value] : table)
    if (auto error = UnknownKey(key.str(), prefix, known, "key")) return error;
  return std::nullopt;
}

Expected<std::string> String(const toml::node& v, const std::string& where, const std::string& expected) {
  if (!v.is_string()) return Bad(where, "expected " + expected + ", got " + TypeName(v));
  return std::string(v.as_string()->get());
}

Expected<const toml::table*> Table(const toml::node& v, const std::string& where) {
  if (!v.is_table()) return Bad(where, std::string("expected a table, got ") + TypeName(v));
  return v.as_table();
}

Expected<const toml::array*> Array(const toml::node& v, const std::string& where, const std::string& of) {
  if (!v.is_array()) return Bad(where, "expected an array of " + of + ", got " + TypeName(v));
  return v.as_array();
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Module names and tool ids: what a registry key and a directory name can
// both hold, with no surprise (no '/', no whitespace, no upper case).
bool IsIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 64 || !IsLowerAlnum(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsVersion(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-' || c == '+';
  });
}

// NAME@sha256:<64 hex>, where NAME is a registry reference (host/path:tag)
// in the characters an OCI reference allows.
bool IsPinnedImage(const std::string& image) {
  const auto at = image.find("@sha256:");
  if (at == std::string::npos || at == 0) return false;
  const std::string name = image.substr(0, at);
  const std::string digest = image.substr(at + 8);
  if (digest.size() != 64 || !std::all_of(digest.begin(), digest.end(), IsHex)) return false;
  if (name.size() > 255 || !IsLowerAlnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return IsLowerAlnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ':' || (c >= 'A' && c <= 'Z');
  });
}

constexpr std::string_view kArchs[] = {"amd64", "arm64", "arm", "386", "ppc64le", "s390x", "riscv64"};

bool IsLinuxPlatform(const std::string& p) {
  if (p.rfind("linux/", 0) != 0) return false;
  std::string rest = p.substr(6);
  std::string variant;
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    variant = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (variant.empty() || variant.size() > 8 || !std::all_of(variant.begin(), variant.end(), IsLowerAlnum))
      return false;
  }
  return std::find(std::begin(kArchs), std::end(kArchs), rest) != std::end(kArchs);
}

// "host[:port]" normalized: lower case, port explicit (443 by default).
Expected<std::string> ParseAllow(const toml::node& v, const std::string& where) {
  auto raw = String(v, where, "a string host[:port]");
  if (!raw.ok()) return raw.error();
  std::string entry = raw.value();
  if (entry.find('/') != std::string::npos) return Bad(where, "expected host[:port], not a URL or a path");
  std::transform(entry.begin(), entry.end(), entry.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (auto why = CheckAllowEntry(entry)) return Bad(where, *why);
  if (entry.find(':') == std::string::npos) entry += ":443";
  // "host:0443" and "host:443" are one request.
  const auto colon = entry.rfind(':');
  return entry.substr(0, colon) + ":" + std::to_string(std::stoi(entry.substr(colon + 1)));
}

// [sandbox.net]: its mode, and the allowlist an egress-allowlist needs.
std::optional<Error> ParseNet(const toml::table& sb, SandboxRequests& r) {
  const toml::node* net = sb.get("net");
  if (net == nullptr) return std::nullopt;
  auto t = Table(*net, "sandbox.net");
  if (!t.ok()) return t.error();
  if (auto e = CheckKeys(*t.value(), "sandbox.net.", {"mode", "allow"})) return *e;
  const toml::node* mode = t.value()->get("mode");
  if (mode == nullptr) return Bad("sandbox.net.mode", "missing: expected one of none, egress-allowlist, egress-any");
  const std::string m = mode->is_string() ? std::string(mode->as_string()->get()) : "";
  if (m == "none")
    r.net = NetMode::kNone;
  else if (m == "egress-allowlist")
    r.net = NetMode::kEgressAllowlist;
  else if (m == "egress-any")
    r.net = NetMode::kEgressAny;
  else
    return Bad("sandbox.net.mode", "expected one of none, egress-allowlist, egress-any");
  const toml::node* allow = t.value()->get("allow");
  if (r.net != NetMode::kEgressAllowlist && allow != nullptr)
    return Bad("sandbox.net.allow", "only allowed with mode egress-allowlist");
  if (r.net == NetMode::kEgressAllowlist) {
    if (allow == nullptr) return Bad("sandbox.net.allow", "missing: egress-allowlist needs at least one host");
    auto a = Array(*allow, "sandbox.net.allow", "host[:port] strings");
    if (!a.ok()) return a.error();
    if (a.value()->empty()) return Bad("sandbox.net.allow", "expected at least one host[:port]");
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < a.value()->size(); ++i) {
      const std::string where = Index("sandbox.net.allow", i);
      auto entry = ParseAllow(*a.value()->get(i), where);
      if (!entry.ok()) return entry.error();
      if (auto [it, fresh] = seen.emplace(entry.value(), i); !fresh)
        return Bad(where, "duplicate of " + Index("sandbox.net.allow", it->second) + " (" + entry.value() + ")");
      r.allow.push_back(entry.value());
    }
  }
  return std::nullopt;
}

// [[sandbox.tools]]: each a tool id of the operator's registry, once.
std::optional<Error> ParseTools(const toml::table& sb, SandboxRequests& r) {
  const toml::node* tools = sb.get("tools");
  if (tools == nullptr) return std::nullopt;
  auto a = Array(*tools, "sandbox.tools", "tables");
  if (!a.ok()) return a.error();
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < a.value()->size(); ++i) {
    const std::string at = Index("sandbox.tools", i);
    auto t = Table(*a.value()->get(i), at);
    if (!t.ok()) return t.error();
    if (auto e = CheckKeys(*t.value(), at + ".", {"id", "trust"})) return *e;
    ToolRequest tool;
    const toml::node* id = t.value()->get("id");
    if (id == nullptr) return Bad(at + ".id", "missing: expected a tool id from the operator's registry");
    auto s = String(*id, at + ".id", "a tool id");
    if (!s.ok()) return s.error();
    if (!IsIdentifier(s.value()))
      return Bad(at + ".id", "expected a tool id: lower-case letters, digits, '.', '_' and '-', at most 64");
    tool.id = s.value();
    if (auto [it, fresh] = seen.emplace(tool.id, i); !fresh)
      return Bad(at + ".id", "duplicate of " + Index("sandbox.tools", it->second) + " (" + tool.id + ")");
    if (const toml::node* trust = t.value()->get("trust")) {
      if (!trust->is_string() || trust->as_string()->get() != "code-exec")
        return Bad(at + ".trust", "expected \"code-exec\" (or no trust key)");
      tool.code_exec = true;
    }
    r.tools.push_back(std::move(tool));
  }
  return std::nullopt;
}

// [sandbox.devices]: gpu, "compute" or "none".
std::optional<Error> ParseDevices(const toml::table& sb, SandboxRequests& r) {
  const toml::node* devices = sb.get("devices");
  if (devices == nullptr) return std::nullopt;
  auto t = Table(*devices, "sandbox.devices");
  if (!t.ok()) return t.error();
  if (auto e = CheckKeys(*t.value(), "sandbox.devices.", {"gpu"})) return *e;
  if (const toml::node* gpu = t.value()->get("gpu")) {
    const std::string g = gpu->is_string() ? std::string(gpu->as_string()->get()) : "";
    if (g == "compute")
      r.gpu = GpuMode::kCompute;
    else if (g == "none")
      r.gpu = GpuMode::kNone;
    else
      return Bad("sandbox.devices.gpu", "expected \"compute\" or \"none\"");
  }
  return std::nullopt;
}

// [[sandbox.containers]]: each an image pinned by digest, for a Linux platform, once.
std::optional<Error> ParseContainers(const toml::table& sb, SandboxRequests& r) {
  const toml::node* containers = sb.get("containers");
  if (containers == nullptr) return std::nullopt;
  auto a = Array(*containers, "sandbox.containers", "tables");
  if (!a.ok()) return a.error();
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < a.value()->size(); ++i) {
    const std::string at = Index("sandbox.containers", i);
    auto t = Table(*a.value()->get(i), at);
    if (!t.ok()) return t.error();
    if (auto e = CheckKeys(*t.value(), at + ".", {"image", "platform"})) return *e;
    ContainerRequest c;
    const toml::node* image = t.value()->get("image");
    if (image == nullptr) return Bad(at + ".image", "missing: expected NAME@sha256:<64 hex digits>");
    auto s = String(*image, at + ".image", "NAME@sha256:<64 hex digits>");
    if (!s.ok()) return s.error();
    if (!IsPinnedImage(s.value()))
      return Bad(at + ".image", "expected an image pinned by digest: NAME@sha256:<64 lower-case hex digits>");
    c.image = s.value();
    const toml::node* platform = t.value()->get("platform");
    if (platform == nullptr) return Bad(at + ".platform", "missing: expected linux/<arch>");
    auto p = String(*platform, at + ".platform", "linux/<arch>");
    if (!p.ok()) return p.error();
    if (!IsLinuxPlatform(p.value()))
      return Bad(at + ".platform",
                 "expected linux/<arch>[/<variant>] with arch amd64, arm64, arm, 386, ppc64le, s390x or riscv64");
    c.platform = p.value();
    if (auto [it, fresh] = seen.emplace(c.image + " " + c.platform, i); !fresh)
      return Bad(at, "duplicate of " + Index("sandbox.containers", it->second));
    r.containers.push_back(std::move(c));
  }
  return std::nullopt;
}

Expected<SandboxRequests> ParseSandbox(const toml::table& sb) {
  if (auto e = CheckKeys(sb, "sandbox.", {"contract", "net", "tools", "devices", "containers", "exec_writable"}))
    return *e;
  SandboxRequests r;
  const toml::node* contract = sb.get("contract");
  if (contract == nullptr) return Bad("sandbox.contract", "missing: expected 1");
  if (!contract->is_integer() || contract->as_integer()->get() != 1)
    return Bad("sandbox.contract", "expected 1 (the only contract version this agent knows)");
  for (auto* stage : {ParseNet, ParseTools, ParseDevices, ParseContainers})
    if (auto e = stage(sb, r)) return *e;
  if (const toml::node* ew = sb.get("exec_writable")) {
    if (!ew->is_boolean())
      return Bad("sandbox.exec_writable", std::string("expected true or false, got ") + TypeName(*ew));
    r.exec_writable = ew->as_boolean()->get();
  }
  return r;
}

Expected<Manifest> ParseModule(const toml::table& doc) {
  Manifest m;
  const toml::node* module = doc.get("module");
  if (module == nullptr) return Bad("module", "missing: expected a [module] table with name and version");
  auto t = Table(*module, "module");
  if (!t.ok()) return t.error();
  if (auto e = CheckKeys(*t.value(), "module.", {"name", "version", "platforms"})) return *e;
  const toml::node* name = t.value()->get("name");
  if (name == nullptr) return Bad("module.name", "missing: expected the module's name");
  auto n = String(*name, "module.name", "a module name");
  if (!n.ok()) return n.error();
  if (!IsIdentifier(n.value()))
    return Bad("module.name", "expected a module name: lower-case letters, digits, '.', '_' and '-', at most 64");
  m.name = n.value();
  const toml::node* version = t.value()->get("version");
  if (version == nullptr) return Bad("module.version", "missing: expected the version being approved");
  auto v = String(*version, "module.version", "a version string");
  if (!v.ok()) return v.error();
  if (!IsVersion(v.value()))
    return Bad("module.version", "expected a version: letters, digits, '.', '_', '-' and '+', at most 64");
  m.version = v.value();
  if (const toml::node* platforms = t.value()->get("platforms")) {
    auto a = Array(*platforms, "module.platforms", "platform names");
    if (!a.ok()) return a.error();
    if (a.value()->empty()) return Bad("module.platforms", "expected at least one of linux, macos, windows");
    for (size_t i = 0; i < a.value()->size(); ++i) {
      const std::string where = Index("module.platforms", i);
      const toml::node& p = *a.value()->get(i);
      const std::string s = p.is_string() ? std::string(p.as_string()->get()) : "";
      Platform platform;
      if (s == "linux")
        platform = Platform::kLinux;
      else if (s == "macos")
        platform = Platform::kMacos;
      else if (s == "windows")
        platform = Platform::kWindows;
      else
        return Bad(where, "expected one of linux, macos, windows");
      if (std::find(m.platforms.begin(), m.platforms.end(), platform) != m.platforms.end())
        return Bad(where, "duplicate platform " + s);
      m.platforms.push_back(platform);
    }
  } else {
    m.platforms = {Platform::kLinux};
  }
  return m;
}

}  // namespace

const char* PlatformName(Platform platform) {
  switch (platform) {
    case Platform::kLinux: return "linux";
    case Platform::kMacos: return "macos";
    case Platform::kWindows: return "windows";
  }
  return "?";
}

bool Manifest::RequestsNothing() const {
  return sandbox.net == NetMode::kNone && sandbox.tools.empty() && sandbox.gpu == GpuMode::kNone &&
         sandbox.containers.empty() && !sandbox.exec_writable;
}

Expected<Manifest> ParseManifest(std::string_view toml_text) {
  if (toml_text.size() > kMaxManifestBytes) return Bad("(manifest)", "larger than 1 MiB");
  // A manifest is ASCII: every value it may hold (names, versions, hosts,
  // tool ids, image references) is. Refusing other bytes up front also
  // keeps untrusted text away from toml++ 3.3's Unicode tables, one of which
  // reaches __builtin_unreachable on some non-ASCII characters between
  // tokens (undefined behaviour, found by sandbox/manifest/manifest_fuzz.cc).
  if (auto e = CheckAsciiToml(toml_text, "(manifest)", "a manifest")) return *e;
  toml::parse_result parsed = toml::parse(toml_text);
  if (!parsed) {
    const auto& err = parsed.error();
    return Bad("(manifest)", "not valid TOML: line " + std::to_string(err.source().begin.line) + ", column " +
                                 std::to_string(err.source().begin.column) + ": " + std::string(err.description()));
  }
  const toml::table& doc = parsed.table();
  if (auto e = CheckKeys(doc, "", {"module", "sandbox"})) return *e;
  auto m = ParseModule(doc);
  if (!m.ok()) return m.error();
  Manifest manifest = std::move(m).value();
  // No [sandbox] table: the module requests nothing.
  if (const toml::node* sb = doc.get("sandbox")) {
    auto t = Table(*sb, "sandbox");
    if (!t.ok()) return t.error();
    auto r = ParseSandbox(*t.value());
    if (!r.ok()) return r.error();
    manifest.sandbox = std::move(r).value();
  }
  return manifest;
}

Expected<Manifest> LoadManifestFile(const std::string& path) {
  std::string why;
  const auto text = ReadFileUpTo(path, kMaxManifestBytes, &why);
  if (!text) return Bad(path, "cannot read the manifest file: " + why);
  return ParseManifest(*text);
}

std::string ErrorLineWithPrefix(std::string_view prefix, const Error& error) {
  std::string line;
  for (unsigned char c : std::string(prefix) + ": " + error.where + ": " + error.what) {
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

std::optional<Error> CheckAsciiToml(std::string_view text, const std::string& where, const std::string& what) {
  size_t line = 1, column = 1;
  for (unsigned char c : text) {
    if (c >= 0x80)
      return Bad(where, "line " + std::to_string(line) + ", column " + std::to_string(column) +
                            ": a non-ASCII byte: " + what + " is ASCII text");
    if (c == '\n')
      ++line, column = 1;
    else
      ++column;
  }
  return std::nullopt;
}

std::string ManifestErrorLine(const Error& error) { return ErrorLineWithPrefix("manifest", error); }

}  // namespace oarbank
