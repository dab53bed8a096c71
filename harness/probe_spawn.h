// One run of a probe, or of the launcher around it, as the battery sees it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "harness/battery.h"

namespace oarbank {

// "SIGSYS" for SIGSYS.
std::string SignalName(int sig);

// Runs argv with exactly `env`, as `uid`, in its own process group; captures
// stdout and stderr and the verdict line; kills the group after `timeout_ms`.
ProbeRun SpawnProbe(const std::vector<std::string>& argv, const std::vector<std::string>& env, uid_t uid,
                    int timeout_ms);

}  // namespace oarbank
