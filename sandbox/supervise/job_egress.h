// The egress-allowlist job's network: a private network namespace whose
// only listener is the agent's egress proxy.
//
// Landlock ABI 4 limits TCP connect by port, not address; on the host's
// network the module could reach any address listening on the proxy's port
// number. So the supervisor gives the job a fresh network namespace (only
// `lo`, no route out) and, in it, one listener on 127.0.0.1:<proxy_port>:
//
//   init (pid 1 of the job, every capability in the job's user namespace,
//   in the job's network namespace)
//     OpenProxyListenerInChild: lo up, socket, bind 127.0.0.1:<port>, listen
//     SendListenerInChild: the fd to the supervisor (SCM_RIGHTS), then
//     closes it, before it forks the launcher: no job process keeps it.
//   supervisor
//     ReceiveListenerFromChild, ServeJobEgress: the EgressProxy accepts on
//     that fd; its lookups and upstream connects happen in the supervisor's
//     (the host's) network namespace. Stopped and joined when the job ends.
//
// `sandbox-exec` (no supervisor) keeps the host's network namespace; there
// the port rule is the whole network confinement.
#pragma once

#include <stdint.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/egress/proxy.h"
#include "sandbox/egress/resolver.h"

namespace oarbank {

// InChild (the job's init): brings `lo` up, for ipc "job" (policy.h
// IpcMode); 0 or the errno with the call that failed in `what`.
int BringUpLoopbackInChild(const char** what);

// InChild (the job's init): brings `lo` up and returns a listening TCP
// socket (close-on-exec) on 127.0.0.1:`port`, or -errno with the call that
// failed in `what`. System calls only, no allocation.
int OpenProxyListenerInChild(uint16_t port, const char** what);

// InChild: sends `fd` over the unix socket `channel` (SCM_RIGHTS). 0 or the
// errno. System calls only, no allocation.
int SendListenerInChild(int channel, int fd);

// FromParent: the listener init sent on `channel`, waiting at most
// `timeout`; an Error says why there is none.
Expected<int> ReceiveListenerFromChild(int channel, std::chrono::milliseconds timeout);

// What the supervisor's proxy takes besides the policy (test-only settings).
struct JobEgressOptions {
  std::vector<egress::Cidr> test_public;        // egress::ParseTestPublicRange
  std::shared_ptr<egress::Resolver> resolver;   // default: the system's
  std::function<void(const std::string&)> log;  // default: a line on stderr
  // Connections the job may hold through its proxy at once (`run
  // --egress-max-connections`): every connection of the job's proxy comes
  // from the job, so this is the job's share.
  size_t max_connections = 64;
};

// Serves `listener` (owned from here on) with the policy's net.allow.
Expected<std::unique_ptr<egress::EgressProxy>> ServeJobEgress(const std::vector<std::string>& allow, int listener,
                                                              const JobEgressOptions& options);

}  // namespace oarbank
