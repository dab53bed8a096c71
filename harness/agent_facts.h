// What the battery needs to know of the agent under test, in its own words
// (its sandbox-report), and of this kernel beside it, asked once before the
// world exists.
#pragma once

#include <string>
#include <vector>

namespace oarbank {

struct AgentFacts {
  // "" when the agent enforces egress-any here (supervisor.net_egress_any),
  // else why not: its egress-any policies' runs must then be refused, and
  // the world gets no network (network_world.h).
  std::string egress_any_unenforceable;
  // The highest syscall number the agent's filter knows
  // (seccomp.syscall_table.highest); -1 when the report does not say.
  int syscall_table_end = -1;
  // The numbers above it that this kernel has (comma-separated), found by
  // calling each of the next kSyscallsAboveScanned with bad arguments from
  // a throw-away child: what the syscall_above_table probe tries.
  std::string kernel_syscalls_above;
  // The Landlock ABI the agent uses (landlock.abi; -1 when the report does
  // not say) and the feature its host probe found missing (landlock.missing):
  // the battery's expectations follow the launcher's ABI, not its own.
  int landlock_abi = -1;
  std::string landlock_missing;
};

inline constexpr int kSyscallsAboveScanned = 64;

// `env`: NAME=VALUE added to the agent's environment (BatteryOptions::agent_env).
AgentFacts AskAgent(const std::string& agent, const std::vector<std::string>& env);

}  // namespace oarbank
