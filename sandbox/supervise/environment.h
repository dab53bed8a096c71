// The module's environment is built, never inherited: a secret in the
// agent's environment (a token, SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS)
// never reaches a module. It holds a fixed PATH, HOME and TMPDIR in the
// policy's private tmp, the proxy variables for egress-allowlist, and the
// variables the caller names explicitly (OARBANK_* and the job's own).
// Both entry points use it, so a module sees the same environment either
// way: `run` (the supervisor, RunOptions::env and --env) and `sandbox-exec`
// (its --env); neither passes the caller's through (a root caller's PATH
// into /root, a token, SSH_AUTH_SOCK).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sandbox/policy/policy.h"

namespace oarbank {

std::vector<std::string> BuildModuleEnvironment(const Policy& policy, const std::map<std::string, std::string>& named);

}  // namespace oarbank
