// The container broker's protocol (the module contract, "Containers: the
// agent's broker"): one JSON object per line in, one per line out. This file
// only decides: it turns one request line into a typed request or a refusal
// {ok: false, error, detail} and never runs anything. It reads the file
// system (to resolve mount sources) but never changes it.
//
// What a request may ask is bounded by the job's BrokerConfig:
//   - the image is one of the approved digest-pinned references
//     (name@sha256:<64 hex>), on the platform it was approved for, and that
//     platform runs on this host;
//   - a mount source is a PortablePath inside the work directory, or
//     `data:<PortablePath>` inside the data directory: relative, `/`
//     separated, no `..`, no symlink anywhere below the base (openat2
//     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), a directory or regular file
//     (never a socket, fifo or device). The destination (IsAllowedDestination)
//     is a POSIX absolute path without `.` or `..` components that is not
//     `/`, not /proc, /sys or /dev or anything below them, and none of the
//     paths the runtime itself provides (kRuntimeDestinations);
//   - `network` other than "none" needs the job's egress grant; "host" is
//     never granted;
//   - cpus and mem_gb are within the job's reservation, timeout_s within
//     the broker's maximum, and each at least what the runtime can express
//     (kMinCpus, kMinMemoryBytes, kMinTimeoutS): a value below is refused,
//     never rounded to "no limit". What is applied is never more than asked:
//     the CPU quota is floor(cpus * kCpuPeriodUs) microseconds per period,
//     the memory limit mem_gb GiB rounded down to a 4 KiB page;
//   - a line is at most kMaxRequestBytes, with bounded counts of args,
//     mounts and env entries.
// Anything else is `bad_request`. The first fault wins.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace oarbank::broker {

inline constexpr size_t kMaxRequestBytes = 64 * 1024;  // one line, newline excluded
inline constexpr size_t kMaxArgs = 1024;
inline constexpr size_t kMaxMounts = 32;
inline constexpr size_t kMaxEnv = 256;
inline constexpr size_t kMaxStringBytes = 16 * 1024;

// The smallest limits the runtime can express. The kernel's CFS bandwidth
// control takes a quota of at least 1 ms per period: with Podman's 100 ms
// period that is 0.01 CPU. Podman refuses less than 6 MiB of memory, and its
// --timeout counts whole seconds.
inline constexpr long long kCpuPeriodUs = 100000;
inline constexpr long long kMinCpuQuotaUs = 1000;
inline constexpr double kMinCpus = 0.01;
inline constexpr long long kMinMemoryBytes = 6ll << 20;
inline constexpr double kMinTimeoutS = 1;

// The quota in microseconds per kCpuPeriodUs for `cpus`: never more than
// asked, 0 when below what the kernel can express.
long long CpuQuotaUs(double cpus);
// The memory limit in bytes for `mem_gb` GiB: rounded down to 4 KiB, 0 when
// below kMinMemoryBytes.
long long MemoryBytes(double mem_gb);

// Container paths the runtime provides itself; a mount never replaces them.
inline constexpr const char* kRuntimeDestinations[] = {"/etc/hosts",         "/etc/resolv.conf", "/etc/hostname",
                                                       "/run/.containerenv", "/.containerenv",   "/run/secrets"};
// "" when `dst` may be a mount destination, else why not.
std::string DestinationProblem(const std::string& dst);

enum class Refusal {
  kBadRequest,            // malformed, oversized, unknown field, wrong type, beyond the reservation
  kImageNotApproved,      // not one of the job's digest-pinned references
  kBadMount,              // source outside the work/data directory, or a bad destination
  kNetworkNotGranted,     // network asked without an egress grant (or "host", never granted)
  kRuntimeUnavailable,    // no container runtime works here, or the image is not present
  kPlatformUnavailable,   // the platform is not the approved one, or does not run on this host
  kReservationExhausted,  // the job's running containers already hold what this one asks
};
const char* RefusalName(Refusal refusal);  // "bad_request", "image_not_approved", ...

struct Refused {
  Refusal error;
  std::string detail;  // names the field: "mounts[1].src: ..."
};

// One approved image: the exact reference and the platform it was approved for.
struct ApprovedImage {
  std::string reference;  // name@sha256:<64 lowercase hex>
  std::string platform;   // os/arch[/variant], e.g. linux/amd64
};

// What one job's broker may grant. Directories are canonical absolute paths.
struct BrokerConfig {
  std::string work_dir;
  std::string data_dir;  // empty: no data directory (data: sources refused)
  std::vector<ApprovedImage> images;
  bool network_granted = false;  // the job's policy has an egress grant
  double cpus = 1;               // the job's reservation
  double mem_gb = 1;
  double max_timeout_s = 3600;
  std::string host_platform;  // what this host runs, e.g. linux/amd64
};

// "name@sha256:<64 lowercase hex>" with a non-empty name and no whitespace.
bool IsDigestPinned(std::string_view reference);
// "os/arch" or "os/arch/variant", lowercase letters, digits, '_' and '-'.
bool IsPlatform(std::string_view platform);
// The platform of the running kernel and CPU: linux/amd64, linux/arm64, ...
std::string HostPlatform();

struct Mount {
  std::string source;    // canonical absolute host path, inside work_dir or data_dir
  std::string base;      // the directory it is inside (work_dir or data_dir)
  std::string relative;  // below base ("" for base itself)
  std::string destination;
  bool read_only = false;
};

struct RunRequest {
  std::string image;
  std::string platform;
  std::vector<std::string> args;
  std::optional<std::vector<std::string>> entrypoint;
  std::vector<Mount> mounts;
  std::map<std::string, std::string> env;
  std::optional<std::string> workdir;
  bool network = false;  // "egress": the runtime's private network
  double timeout_s = 0;
  double cpus = 0;  // resolved: the request's, else the reservation
  double mem_gb = 0;
  long long cpu_quota_us = 0;  // CpuQuotaUs(cpus), > 0
  long long memory_bytes = 0;  // MemoryBytes(mem_gb), > 0
};

struct PullRequest {
  std::string image;
  std::string platform;
};

struct StatusRequest {};

using Request = std::variant<RunRequest, PullRequest, StatusRequest>;
using Parsed = std::variant<Request, Refused>;

// One line (without its newline) against the job's config.
Parsed ParseRequest(std::string_view line, const BrokerConfig& config);

// Resolves a mount source ("dir/file" or "data:dir") below its base with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS); exposed for the runtime,
// which pins the very same path again with an fd before mounting it.
std::variant<Mount, Refused> ResolveMountSource(const std::string& src, const std::string& field,
                                                const BrokerConfig& config);

// {"ok": false, "error": "...", "detail": "..."}
nlohmann::ordered_json RefusalJson(const Refused& refused);
// One answer line: never throws on invalid UTF-8 (replaced), ends in '\n'.
std::string AnswerLine(const nlohmann::ordered_json& answer);

}  // namespace oarbank::broker
