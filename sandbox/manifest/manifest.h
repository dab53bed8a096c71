// A module's manifest (the module contract, "[sandbox]: grants"): who the
// module is, the platforms it declares, and the grants it requests. The
// manifest is where the contract starts: an operator approves exactly these
// requests (approval.h), and only then does the agent turn them into a
// Policy for a job (manifest_policy.h).
//
//   [module]
//   name = "example-runner"
//   version = "1.4.0"
//   platforms = ["linux", "macos"]        # default ["linux"]
//
//   [sandbox]
//   contract = 1
//   net = { mode = "egress-allowlist", allow = ["api.example.org", "*.files.example.org:8443"] }
//   tools = [{ id = "java17", trust = "code-exec" }]
//   devices = { gpu = "compute" }
//   containers = [{ image = "docker.io/org/tool:1.2@sha256:<64 hex>", platform = "linux/amd64" }]
//   exec_writable = false
//
// ParseManifest is strict, because a typo must never widen or silently
// drop a grant: an unknown key, a wrong type, an allow entry that is an IP
// address or has '*' anywhere but a leading "*." label, a bad port, an
// image without "@sha256:" and 64 hex digits, an unknown tool trust: each is
// one Error naming the key ("sandbox.net.allow[1]"). Allow entries are
// normalized (lower case, the port made explicit: 443 by default) so that
// two spellings of one request are one request.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

enum class Platform { kLinux, kMacos, kWindows };
const char* PlatformName(Platform platform);  // "linux", "macos", "windows"

struct ToolRequest {
  std::string id;          // a key of the operator's tool registry
  bool code_exec = false;  // trust = "code-exec": runs arbitrary code, flagged at approval
};

struct ContainerRequest {
  std::string image;     // NAME@sha256:<64 hex>
  std::string platform;  // linux/<arch>[/<variant>]
};

// The grants, as requested. Defaults are the contract's: no network, no
// tools, no GPU, no containers, written files not executable.
struct SandboxRequests {
  NetMode net = NetMode::kNone;
  std::vector<std::string> allow;  // "host:port", lower case, port explicit
  std::vector<ToolRequest> tools;
  GpuMode gpu = GpuMode::kNone;
  std::vector<ContainerRequest> containers;
  bool exec_writable = false;
};

struct Manifest {
  std::string name;
  std::string version;
  std::vector<Platform> platforms;  // at least one, no duplicates
  SandboxRequests sandbox;

  // True when [sandbox] grants nothing beyond the contract's defaults: such
  // a version needs no approval.
  bool RequestsNothing() const;
};

Expected<Manifest> ParseManifest(std::string_view toml_text);
// A missing or unreadable file is an Error whose `where` is the file name.
Expected<Manifest> LoadManifestFile(const std::string& path);

// Manifests and tool registries are ASCII TOML: the first non-ASCII byte is
// an Error naming its line and column. This also keeps text away from
// toml++ 3.3's Unicode tables, one of which reaches __builtin_unreachable on
// some non-ASCII characters between tokens (found by manifest_fuzz.cc).
std::optional<Error> CheckAsciiToml(std::string_view text, const std::string& where, const std::string& what);

// "manifest: sandbox.net.allow[1]: IP addresses are not allowed, only host
// names"; control bytes are shown escaped, never written to the terminal.
std::string ManifestErrorLine(const Error& error);
// The same escaping under another prefix ("registry", "approval", ...).
std::string ErrorLineWithPrefix(std::string_view prefix, const Error& error);

}  // namespace oarbank
