// The Podman client the broker drives: its global arguments (the agent's
// own storage and configuration, never the system's), each call run with a
// time limit through the one subprocess routine (common/subprocess.h), and
// the removal of a container whatever its state. Internal to the broker;
// the calls other code uses are declared in container_runtime.h.
#pragma once

#include <sys/types.h>

#include <string>

#include "sandbox/broker/container_runtime.h"

namespace oarbank::broker {

// Podman says it knows no container `name` (`container exists` answers 1;
// an error or a time-out is not an answer).
bool ContainerGone(const RuntimeConfig& rt, const std::string& name);

struct Removal {
  int wait_status = -1;  // the podman client's, as waitpid gives it; -1 unknown
  bool gone = false;     // the container is no more
};

// Removes the container `name` whatever its state, and stops the podman
// client `pid` (or none: -1): podman rm --force until Podman no longer
// knows the name and the client has exited, within kKillGraceS. A
// container that does not exist yet (still being created) is retried,
// never counted as removed.
Removal RemoveContainer(const RuntimeConfig& rt, const std::string& name, pid_t pid);

}  // namespace oarbank::broker
