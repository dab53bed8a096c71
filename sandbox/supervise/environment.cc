#include "sandbox/supervise/environment.h"

#include <string.h>
#include <unistd.h>

#include "sandbox/common/fault_hooks.h"

namespace oarbank {

std::vector<std::string> BuildModuleEnvironment(const Policy& policy, const std::map<std::string, std::string>& named) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"LANG", "C.UTF-8"},
  };
  const auto& scratch = policy.tmp() ? policy.tmp() : (policy.work() ? policy.work() : policy.data());
  if (scratch) {
    env["HOME"] = *scratch;
    env["TMPDIR"] = *scratch;
  }
  switch (policy.net().mode) {
    case NetMode::kNone:
    case NetMode::kEgressAny: break;
    case NetMode::kEgressAllowlist: {
      const std::string proxy = "http://127.0.0.1:" + std::to_string(policy.net().proxy_port);
      for (const char* name : {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"})
        env[name] = proxy;
      break;
    }
  }
  for (const auto& [key, value] : named) env[key] = value;
  if (FaultSkipStep("environment-filter"))  // test-only build: the caller's variables pass
    for (char** e = environ; *e != nullptr; ++e)
      if (const char* eq = strchr(*e, '=')) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  std::vector<std::string> out;
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace oarbank
