// The per-job container broker: `oarbank-agent broker`. It listens on the
// job's unix socket (0600, owned by the job's uid) and answers one JSON
// object per line (broker_protocol.h), each connection in a process of its
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
// Where no runtime works (podman or runc missing, not root), every valid
// request answers runtime_unavailable with the reason; malformed ones still
// answer bad_request.
#pragma once

#include <string>
#include <vector>

#include "broker_protocol.h"
#include "install_paths.h"
#include "container_runtime.h"

namespace oarbank::broker {

// Connections served at once; beyond, a connection gets one refusal line.
inline constexpr size_t kMaxConnections = 32;

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
  std::string state_dir = OARBANK_STATE_DIR "/containers";
  long job_uid = -1;  // default: the work directory's owner
  long job_gid = -1;
  std::vector<std::string> job_argv;  // after --: run it, stop when it exits
};

// Everything a connection handler needs, decided once at start.
struct Broker {
  BrokerConfig config;
  RuntimeConfig runtime;
  RuntimeProbe probe;
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
