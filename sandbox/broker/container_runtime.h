// The agent's container runtime: Debian's Podman, driven with an explicit
// configuration that never touches the system's (--root, --runroot,
// --runtime and CONTAINERS_CONF / CONTAINERS_STORAGE_CONF under the
// broker's state directory). On hybrid cgroup hosts crun refuses to run, so
// the OCI runtime is runc, the cgroup manager cgroupfs and the default
// ulimits empty (they cannot be raised there).
//
// Every container the broker starts is, always:
//   run --rm --pull=never --platform P --cpu-period 100000 --cpu-quota Q
//   --memory M --memory-swap M --pids-limit 4096 --timeout T
//   --label oarbank.job=<job> --name oarbank-<job>-<pid>-<n>
//   --uidmap 0:<base>:65536 --gidmap 0:<base>:65536, <base> the job's own
//   subordinate range (subid_ranges.h)
//   --network none, or with --network-granted --network ns:<the job's own
//   network namespace> (never Podman's bridge): behind an egress-any job's
//   ruleset, or with only an egress-allowlist job's proxy (HTTPS_PROXY,
//   HTTP_PROXY set to it)
//   --security-opt no-new-privileges --http-proxy=false --systemd=false
//   -v <pinned source>:<dst>:{ro|rw},nosuid,nodev for the validated mounts
// and never --privileged, --network host, --device, --volumes-from, an
// extra socket or the host's IPC/PID/UTS namespaces. Container root is
// <base>, an id no host account has, for every job (root jobs included).
//
// Mount sources are pinned: the request's process enters a private mount
// namespace, opens each validated source with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS), checks that tree for unix sockets (a bounded walk:
// a tree holding one, or too large or deep to check, is refused) and mounts
// a detached clone of that very fd, idmapped (the job's uid and gid on disk
// are <base>, container root, through it; nothing else is mapped) and
// nosuid,nodev (read-only for ro), onto a staging path under
// <state>/mounts/job-<job>/, which is what Podman mounts. A module that
// swaps a directory for a symlink after validation changes nothing, and
// what container root writes there belongs to the job's uid on disk. After
// the run a bounded walk of every writable mount clears setuid and setgid
// bits and removes device nodes (the answer's work_checked says whether the
// walk finished).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/broker/protocol.h"
#include "sandbox/common/subprocess.h"

namespace oarbank::broker {

inline constexpr uint32_t kSubidCount = 65536;     // container ids 0..65535
inline constexpr size_t kMaxWalkEntries = 100000;  // mount trees checked before and after a run
inline constexpr int kMaxWalkDepth = 64;
inline constexpr double kMaxWalkSeconds = 5;
inline constexpr size_t kTailBytes = 4096;                 // stdout_tail / stderr_tail
inline constexpr uint64_t kMaxOutputBytes = 256ull << 20;  // per stream, written to the work directory
inline constexpr long kPidsLimit = 4096;

struct RuntimeConfig {
  std::string podman;  // absolute path
  std::string runc;    // absolute path
  // oarbank-container-init (absolute, trusted): each container's first
  // process, which ends the container when the broker's end of its
  // lifeline closes, however the broker died.
  std::string container_init;
  std::string state_dir;  // canonical, owned by the agent
  std::string job_id;     // [A-Za-z0-9_.-]{1,64}
  uid_t job_uid = 0;
  gid_t job_gid = 0;
  uint32_t subid_base = 0;  // the job's leased range (subid_ranges.h); 0: none, nothing runs
  // A container with network joins the job's own network namespace (a file
  // naming it, `run --publish-netns`), never Podman's bridge: egress-any
  // jobs' containers are behind the job's ruleset, egress-allowlist jobs'
  // reach only the job's proxy, at `job_proxy` (HTTPS_PROXY, HTTP_PROXY).
  std::string job_netns;
  std::string job_proxy;  // "http://127.0.0.1:<port>", or empty
};

// <state>/mounts/job-<job>: the job's staging points, and nobody else's.
std::string StagingDir(const RuntimeConfig& rt);
// <state>/seccomp.json: the containers' seccomp profile (container_seccomp.h).
inline std::string SeccompProfilePath(const RuntimeConfig& rt) { return rt.state_dir + "/seccomp.json"; }
// Removes what killed handlers left in StagingDir (empty directories and
// files; never recursive into a mount).
void RemoveStaging(const RuntimeConfig& rt);

// Whether a runtime works here: podman and runc on `path_env`,
// oarbank-container-init beside this binary or installed, only root able to
// have written it, and this process runs as root (the id maps need it).
// `detail` says what is missing.
struct RuntimeProbe {
  bool available = false;
  std::string detail;
  std::string podman;
  std::string runc;
  std::string container_init;
};
RuntimeProbe ProbeRuntime(const std::string& path_env);
// Where oarbank-container-init is for `program` (a path to the running
// binary): beside it when there, else the installed one.
std::string ContainerInitPathFor(const std::string& program);

bool IsJobId(const std::string& id);

// Each job's containers live in a storage root of their own,
// <state>/j<slot> (its id range's slot): Podman chowns its layer directory
// to the mapped root of whichever container it creates last, so two jobs
// with different ranges in one root would lock each other out, and one
// job's container root would own the others' layers. The agent's images
// are read from <state>/storage (vfs.imagestore), never written.
std::string SlotRoot(const RuntimeConfig& rt);
// Makes the job's root and removes whatever a dead job of the same range
// left in it. "" or what failed.
std::string PrepareSlot(const RuntimeConfig& rt);

// Podman's global options and environment for this configuration.
std::vector<std::string> GlobalArgs(const RuntimeConfig& rt);
std::vector<std::string> PodmanEnvironment(const RuntimeConfig& rt, const std::string& path_env);

// The whole `podman ... run ...` argv for a validated request. `sources`
// are the pinned paths that replace each mount's source, in order.
std::vector<std::string> BuildRunArgv(const RuntimeConfig& rt, const RunRequest& req,
                                      const std::vector<std::string>& sources, const std::string& name);

// Writes containers.conf and storage.conf and makes the state directories.
// "" or what failed.
std::string PrepareState(const RuntimeConfig& rt);

// Runs podman with these arguments (after the global ones), killed after
// timeout_s; its exit status is ExitCode() (-1 if it could not start).
CapturedRun RunPodman(const RuntimeConfig& rt, const std::vector<std::string>& args, double timeout_s = 60);

bool ImagePresent(const RuntimeConfig& rt, const std::string& reference);
// Ids of the containers labelled oarbank.job=<job>: every one, or the
// running ones; nullopt (and `why`) when Podman could not list them, which
// is never "none".
std::optional<std::vector<std::string>> JobContainers(const RuntimeConfig& rt, bool running_only = false,
                                                      std::string* why = nullptr);
// Kills and removes every container of the job; "" or what failed.
std::string RemoveJobContainers(const RuntimeConfig& rt);

// Why the tree at `fd` cannot be mounted into a container: it holds a unix
// socket, or it is larger (kMaxWalkEntries) or deeper (kMaxWalkDepth) than
// the broker checks, or took longer than kMaxWalkSeconds. "" when none.
std::string SocketInTree(int fd);

// Runs a validated request to its end (or timeout_s counted from
// `accepted`, or the client hanging up on `client_fd`): the answer of
// container.run. The full output is in <work>/.oarbank-broker/<name>.
// {stdout,stderr}, owned by the job. On a timeout or hang-up the container
// is removed whatever state it is in (being created, started or running),
// retried until Podman no longer knows it, within kKillGraceS.
inline constexpr double kKillGraceS = 30;
nlohmann::ordered_json RunContainer(const RuntimeConfig& rt, const BrokerConfig& config, const RunRequest& req,
                                    int client_fd, std::chrono::steady_clock::time_point accepted);

}  // namespace oarbank::broker
