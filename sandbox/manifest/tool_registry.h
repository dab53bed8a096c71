// The operator's tool registry (the module contract, "tools"): the map from
// a tool id a manifest may request to the host paths it stands for, per OS.
// A module never names a host path itself: it asks for "java17" and the
// node that runs it decides which JDK directory that is.
//
//   # /etc/oarbank/tools.toml
//   [tools.java17]
//   linux = ["/usr/lib/jvm/java-17-openjdk-amd64"]
//   macos = ["/Library/Java/JavaVirtualMachines/temurin-17.jdk"]
//   windows = ['C:\Program Files\Eclipse Adoptium\jdk-17']
//
// Paths are whole directories or single files, no globs. The paths for the
// running OS are resolved to canonical paths when a job's tools are
// resolved (a symlink is followed once, here, like a Policy's paths); a
// path that does not exist on this node, or an id the registry does not
// know, is an Error naming it. The module finds its tools in the JSON file
// named by OARBANK_TOOLS_FILE ({"tools": {"java17": ["/usr/lib/jvm/..."]}}).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/manifest/manifest.h"

namespace oarbank {

inline constexpr const char* kToolsFileEnv = "OARBANK_TOOLS_FILE";
inline constexpr const char* kDefaultToolRegistry = OARBANK_CONFIG_DIR "/tools.toml";

struct RegistryTool {
  std::string id;
  std::map<Platform, std::vector<std::string>> paths;  // as the operator wrote them
};

struct ToolRegistry {
  std::string source;  // the file it came from, for error messages
  std::map<std::string, RegistryTool> tools;
};

// Errors are prefixed "registry" by the caller: "tools.java17.linux[0]: ...".
Expected<ToolRegistry> ParseToolRegistry(std::string_view toml_text, std::string source = "(registry)");
Expected<ToolRegistry> LoadToolRegistryFile(const std::string& path);

struct ResolvedTool {
  std::string id;
  std::vector<std::string> paths;  // canonical, existing
  bool code_exec = false;
};

// Each requested id resolved to its canonical paths for `os` on this node.
// An unknown id is an Error at "sandbox.tools[i].id" naming it; a path that
// cannot be resolved names the registry entry.
Expected<std::vector<ResolvedTool>> ResolveTools(const ToolRegistry& registry,
                                                 const std::vector<ToolRequest>& requested,
                                                 Platform os = Platform::kLinux);

// {"tools": {"<id>": ["<path>", ...]}}, what OARBANK_TOOLS_FILE names.
std::string ToolsFileJson(const std::vector<ResolvedTool>& tools);
std::optional<Error> WriteToolsFile(const std::string& path, const std::vector<ResolvedTool>& tools);

}  // namespace oarbank
