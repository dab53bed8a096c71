// The launcher's side of the broker grant (plan.h BrokerHandoff): below
// Landlock ABI 9 it connects to the broker socket before any confinement
// step, keeps that one connection across exec and tells the module
// OARBANK_BROKER=fd:N; from ABI 9 it only tells the module the path,
// OARBANK_BROKER=unix:/path, which Landlock lets it connect to alone.
//
// What the inherited connection allows: the broker protocol and nothing
// else. The module writes one JSON request per line and reads one answer
// per line, in order, as long as it keeps the fd open; it cannot make a
// second connection (socket(AF_UNIX) is refused), bind or listen (refused
// always), and fds it sends along (SCM_RIGHTS) are dropped unread by the
// broker. Closing it ends the module's access to the broker.
#pragma once

#include <string>

#include "sandbox/common/expected.h"
#include "sandbox/plan/plan.h"

namespace oarbank {

// The fd number the supervisor gives a job's broker connection.
inline constexpr int kJobBrokerFd = 3;

// A connected SOCK_STREAM socket to `path`, close-on-exec (the launcher
// clears that flag for the one fd it keeps). The Error names the path.
Expected<int> ConnectBroker(const std::string& path);

// "fd:N", "unix:/path", or "" without a broker.
std::string BrokerEnvironmentValue(BrokerHandoff handoff, const std::string& path, int fd);

}  // namespace oarbank
