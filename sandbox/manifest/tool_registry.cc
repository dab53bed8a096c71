#include "sandbox/manifest/tool_registry.h"

#include "sandbox/common/json_formats.h"
#include "sandbox/common/parse_error.h"
#include "sandbox/common/trust_file.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace oarbank {
namespace {

bool IsToolId(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!ok(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return ok(c) || c == '.' || c == '_' || c == '-'; });
}

// Absolute for the OS it is written for: "/..." on linux and macos,
// "X:\..." on windows. No globs: a grant is a whole directory or a file.
std::optional<std::string> CheckPath(const std::string& p, Platform os) {
  if (p.empty() || p.size() >= PATH_MAX || p.find('\0') != std::string::npos) return "expected a path";
  if (p.find_first_of("*?[") != std::string::npos)
    return "globs are not allowed: a tool is whole directories or single files";
  switch (os) {
    case Platform::kLinux:
    case Platform::kMacos:
      if (p[0] != '/') return "expected an absolute path, got \"" + p + "\"";
      break;
    case Platform::kWindows:
      if (p.size() < 3 || !std::isalpha(static_cast<unsigned char>(p[0])) || p[1] != ':' || p[2] != '\\')
        return "expected an absolute Windows path (X:\\...), got \"" + p + "\"";
      break;
  }
  return std::nullopt;
}

}  // namespace

Expected<ToolRegistry> ParseToolRegistry(std::string_view toml_text, std::string source) {
  ToolRegistry reg;
  reg.source = std::move(source);
  if (auto e = CheckAsciiToml(toml_text, "(registry)", "a tool registry")) return *e;
  toml::parse_result parsed = toml::parse(toml_text);
  if (!parsed)
    return Bad("(registry)", "not valid TOML: line " + std::to_string(parsed.error().source().begin.line) + ": " +
                                 std::string(parsed.error().description()));
  const toml::table& doc = parsed.table();
  for (auto&& [key, value] : doc) {
    (void)value;
    if (key.str() != "tools") return Bad(std::string(key.str()), "unknown key (known: tools)");
  }
  const toml::node* tools = doc.get("tools");
  if (tools == nullptr) return reg;  // an empty registry: no tool can be granted
  if (!tools->is_table()) return Bad("tools", "expected a table of tool ids");
  for (auto&& [id, entry] : *tools->as_table()) {
    const std::string at = "tools." + std::string(id.str());
    if (!IsToolId(id.str()))
      return Bad(at, "expected a tool id: lower-case letters, digits, '.', '_' and '-', at most 64");
    if (!entry.is_table()) return Bad(at, "expected a table of per-OS path lists");
    RegistryTool tool;
    tool.id = std::string(id.str());
    for (auto&& [os_key, list] : *entry.as_table()) {
      const std::string where = at + "." + std::string(os_key.str());
      Platform os;
      if (os_key.str() == "linux")
        os = Platform::kLinux;
      else if (os_key.str() == "macos")
        os = Platform::kMacos;
      else if (os_key.str() == "windows")
        os = Platform::kWindows;
      else
        return Bad(where, "unknown key (known: linux, macos, windows)");
      if (!list.is_array() || list.as_array()->empty()) return Bad(where, "expected a non-empty array of paths");
      for (size_t i = 0; i < list.as_array()->size(); ++i) {
        const std::string pw = where + "[" + std::to_string(i) + "]";
        const toml::node& p = *list.as_array()->get(i);
        if (!p.is_string()) return Bad(pw, "expected a path string");
        const std::string path(p.as_string()->get());
        if (auto why = CheckPath(path, os)) return Bad(pw, *why);
        tool.paths[os].push_back(path);
      }
    }
    reg.tools.emplace(tool.id, std::move(tool));
  }
  return reg;
}

Expected<ToolRegistry> LoadToolRegistryFile(const std::string& path) {
  // A trust file: whoever writes it decides which host paths a module gets.
  auto text = ReadTrustedFile(path);
  if (!text.ok()) return Bad(path, text.error().what);
  if (!text.value()) return Bad(path, "no tool registry here");
  if (text.value()->size() > (1u << 20)) return Bad(path, "larger than 1 MiB");
  return ParseToolRegistry(*text.value(), path);
}

Expected<std::vector<ResolvedTool>> ResolveTools(const ToolRegistry& registry,
                                                 const std::vector<ToolRequest>& requested, Platform os) {
  std::vector<ResolvedTool> out;
  for (size_t i = 0; i < requested.size(); ++i) {
    const std::string at = "sandbox.tools[" + std::to_string(i) + "].id";
    const auto& req = requested[i];
    const auto it = registry.tools.find(req.id);
    if (it == registry.tools.end())
      return Bad(at, "no tool \"" + req.id + "\" in the operator's tool registry (" + registry.source + ")");
    const auto paths = it->second.paths.find(os);
    if (paths == it->second.paths.end())
      return Bad(at, "tool \"" + req.id + "\" has no " + PlatformName(os) + " paths in the tool registry (" +
                         registry.source + ")");
    ResolvedTool tool{req.id, {}, req.code_exec};
    for (size_t j = 0; j < paths->second.size(); ++j) {
      const std::string& raw = paths->second[j];
      const std::string entry = "tools." + req.id + "." + PlatformName(os) + "[" + std::to_string(j) + "]";
      if (os != Platform::kLinux) {
        tool.paths.push_back(raw);  // resolved on its own OS, never here
        continue;
      }
      char resolved[PATH_MAX];
      if (realpath(raw.c_str(), resolved) == nullptr)
        return Bad(at, "tool \"" + req.id + "\": " + raw + " (" + entry + ") does not exist on this node");
      struct stat st {};
      if (stat(resolved, &st) != 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
        return Bad(at, "tool \"" + req.id + "\": " + raw + " (" + entry + ") is not a directory or a regular file");
      if (std::find(tool.paths.begin(), tool.paths.end(), resolved) == tool.paths.end()) tool.paths.push_back(resolved);
    }
    out.push_back(std::move(tool));
  }
  return out;
}

std::string ToolsFileJson(const std::vector<ResolvedTool>& tools) {
  nlohmann::ordered_json j = {{"format", kToolsFormat}, {"tools", nlohmann::ordered_json::object()}};
  for (const auto& t : tools) j["tools"][t.id] = t.paths;
  return j.dump(2) + "\n";
}

std::optional<Error> WriteToolsFile(const std::string& path, const std::vector<ResolvedTool>& tools) {
  std::ofstream out(path, std::ios::trunc);
  out << ToolsFileJson(tools);
  if (!out) return Bad(path, "cannot write the tools file");
  chmod(path.c_str(), 0644);
  return std::nullopt;
}

}  // namespace oarbank
