// The per-job container broker: `oarbank-agent broker`. It listens on the
// job's unix socket (0600, owned by the job's uid) and answers one JSON
// object per line (sandbox/broker/protocol.h), each connection in a process of its
// own. A connection made by path (OARBANK_BROKER=unix:/path, Landlock ABI 9)
// normally carries one request; a connection the launcher hands over
// already connected (OARBANK_BROKER=fd:N, below ABI 9) carries the job's
// requests one after the other, each answered before the next is read.
//
// Containers die with their job: with a job command after `--` the broker
// runs it and stops when it exits; otherwise it stops on SIGTERM or SIGINT
// (and when its parent dies). Stopping removes every container labelled
// oarbank.job=<job>, running or not, before the broker exits.
//
// Whatever the broker's end, SIGKILL included, a watchdog finishes the job:
// a process the broker forks first, in a session of its own, ignoring
// termination signals and holding nothing but a pipe whose other end only
// the broker (and its connection handlers, which die with it) holds. When
// that pipe closes, the watchdog removes every container of the job
// (podman rm --force by label, repeated until two passes find none, within
// kWatchdogGraceS) and the job's staging points, then releases the job's
// subordinate id range, which it owns (subid_ranges.h). The watchdog
// killed first stops the broker the same way (exit 70): nothing would
// remove the containers if the broker died too, and the range's lease died
// with its owner. Both killed at once leave the containers to the next job
// that leases the range (PrepareSlot removes what its storage root holds).
//
// The reservation (--cpus, --mem-gb) is the job's: the sum over the
// requests being run at once never exceeds it. A request that would go
// beyond answers reservation_exhausted; it is never granted.
//
// Where no runtime works (podman or runc missing, not root), every valid
// request answers runtime_unavailable with the reason; malformed ones still
// answer bad_request.
#pragma once

#include <string>
#include <vector>

#include "sandbox/broker/container_runtime.h"
#include "sandbox/broker/protocol.h"
#include "sandbox/broker/subid_ranges.h"
#include "sandbox/common/install_paths.h"

namespace oarbank::broker {

// Connections served at once; beyond, a connection gets one refusal line.
inline constexpr size_t kMaxConnections = 32;
inline constexpr double kWatchdogGraceS = 20;

struct BrokerArgs {
  std::string socket_path;
  std::string work_dir;
  std::string data_dir;
  std::vector<std::string> images;  // REF=PLATFORM
  std::string job_id;
  double cpus = 1;
  double mem_gb = 1;
  double max_timeout_s = 3600;
  bool network_granted = false;
  std::string job_netns;    // with network_granted: the job's network namespace (run --publish-netns)
  long job_proxy_port = 0;  // egress-allowlist jobs: the job's proxy on 127.0.0.1 in that namespace
  std::string state_dir = OARBANK_STATE_DIR "/containers";
  long job_uid = -1;  // default: the work directory's owner
  long job_gid = -1;
  std::string subid_registry = kDefaultSubidRegistry;
  std::vector<std::string> job_argv;  // after --: run it, stop when it exits
};

// What the job's running requests hold, shared by the connection handlers
// (an anonymous shared mapping made before they fork, under a robust
// process-shared mutex): one slot per connection.
struct Ledger;
Ledger* MakeLedger();
// Takes quota/memory for `pid`, or says why not (the job's running requests
// already hold too much). "" when taken.
std::string Reserve(Ledger* ledger, pid_t pid, long long cpu_quota_us, long long memory_bytes, long long total_quota_us,
                    long long total_memory_bytes);
// What the running requests hold: CPU quota (us per period) and bytes.
std::pair<long long, long long> Reserved(Ledger* ledger);
// Frees what `pid` holds (after its request, or when it died).
void Release(Ledger* ledger, pid_t pid);

// Everything a connection handler needs, decided once at start.
struct Broker {
  BrokerConfig config;
  RuntimeConfig runtime;
  RuntimeProbe probe;
  Ledger* ledger = nullptr;  // none: every run refused (see BrokerMain)
  std::string subid_registry;
};

// Validates the arguments (one line naming what is wrong, exit 64).
std::variant<Broker, std::string> MakeBroker(const BrokerArgs& args);

// Answers one request line (what a connection handler does per line).
nlohmann::ordered_json Answer(const Broker& broker, std::string_view line, int client_fd);

// Serves a connection until the client closes it (or sends an oversized line).
void ServeConnection(const Broker& broker, int fd);

// The subcommand: the job command's exit status, else 0; 64 bad arguments,
// 70 the socket cannot be set up.
int BrokerMain(const BrokerArgs& args);

// For sandbox-report: whether a container runtime works here.
nlohmann::ordered_json ContainerRuntimeReport();

}  // namespace oarbank::broker
