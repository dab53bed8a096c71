#include "sandbox/broker/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <set>

#include "sandbox/common/json_formats.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank::broker {
namespace {

using json = nlohmann::json;

Refused Bad(std::string detail) { return {Refusal::kBadRequest, std::move(detail)}; }
Refused BadMount(std::string detail) { return {Refusal::kBadMount, std::move(detail)}; }

bool Lower(char c) { return c >= 'a' && c <= 'z'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }
bool HexLower(char c) { return Digit(c) || (c >= 'a' && c <= 'f'); }

// A string field of at most kMaxStringBytes with no NUL or other control byte.
std::optional<std::string> Text(const json& v) {
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > kMaxStringBytes) return std::nullopt;
  for (unsigned char c : s)
    if (c == 0) return std::nullopt;
  return s;
}

std::optional<Refused> CheckKeys(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : obj.items())
    if (!allowed.count(key)) return Bad(where + (where.empty() ? "" : ".") + key + ": unknown field");
  return std::nullopt;
}

// A positive finite number within [min, max]; `min_what` says why the
// minimum is what it is.
std::variant<double, Refused> Number(const json& v, const std::string& field, double min, double max, const char* what,
                                     const char* min_what) {
  if (!v.is_number()) return Bad(field + ": expected a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0) return Bad(field + ": expected a positive number");
  char buf[256];
  if (d < min) {
    snprintf(buf, sizeof buf, "%s: %g is below the smallest allowed value %g (%s)", field.c_str(), d, min, min_what);
    return Bad(buf);
  }
  if (d > max) {
    snprintf(buf, sizeof buf, "%s: %g exceeds %s of %g", field.c_str(), d, what, max);
    return Bad(buf);
  }
  return d;
}

const ApprovedImage* FindApproved(const std::string& image, const BrokerConfig& config) {
  for (const auto& a : config.images)
    if (a.reference == image) return &a;
  return nullptr;
}

// image + platform, shared by container.run and container.pull.
std::optional<Refused> CheckImage(const json& req, std::string& image, std::string& platform,
                                  const BrokerConfig& config) {
  if (!req.contains("image")) return Bad("image: required");
  auto img = Text(req["image"]);
  if (!img) return Bad("image: expected a string");
  if (!req.contains("platform")) return Bad("platform: required");
  auto plat = Text(req["platform"]);
  if (!plat) return Bad("platform: expected a string");
  const ApprovedImage* approved = FindApproved(*img, config);
  if (approved == nullptr)
    return Refused{Refusal::kImageNotApproved,
                   "image: " + *img + " is not one of this job's approved digest-pinned references"};
  if (*plat != approved->platform)
    return Refused{Refusal::kPlatformUnavailable, "platform: " + *plat + " is not the platform " + *img +
                                                      " was approved for (" + approved->platform + ")"};
  if (approved->platform != config.host_platform)
    return Refused{Refusal::kPlatformUnavailable, "platform: " + approved->platform + " does not run on this host (" +
                                                      config.host_platform + "), and the broker does not emulate"};
  image = *img;
  platform = *plat;
  return std::nullopt;
}

// A relative, '/'-separated path with no empty, "." or ".." component, or
// "" / "." for the base itself. No ':' or ',' (the runtime's mount syntax).
std::optional<std::string> CheckPortablePath(const std::string& p) {
  if (p.empty() || p == ".") return std::nullopt;
  if (p.size() > 4096) return "longer than 4096 bytes";
  if (p.front() == '/') return "must be relative (a PortablePath inside the work directory, or data:...)";
  for (unsigned char c : p) {
    if (c < 0x20 || c == 0x7f) return "contains a control character";
    if (c == '\\' || c == ':' || c == ',') return std::string("contains '") + static_cast<char>(c) + "'";
  }
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find('/', start), p.size());
    const std::string part = p.substr(start, end - start);
    if (part.empty()) return "has an empty component";
    if (part == "..") return "has a '..' component: sources never leave their directory";
    if (part == ".") return "has a '.' component";
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<Refused> CheckDestination(const std::string& dst, const std::string& field) {
  if (std::string why = DestinationProblem(dst); !why.empty()) return BadMount(field + ": " + why);
  return std::nullopt;
}

std::variant<Mount, Refused> ParseMount(const json& m, size_t i, const BrokerConfig& config) {
  const std::string where = "mounts[" + std::to_string(i) + "]";
  if (!m.is_object()) return Bad(where + ": expected an object {src, dst, ro}");
  if (auto r = CheckKeys(m, {"src", "dst", "ro"}, where)) return *r;
  if (!m.contains("src") || !m.contains("dst")) return Bad(where + ": src and dst are required");
  auto src = Text(m["src"]);
  auto dst = Text(m["dst"]);
  if (!src) return Bad(where + ".src: expected a string");
  if (!dst) return Bad(where + ".dst: expected a string");
  bool ro = false;
  if (m.contains("ro")) {
    if (!m["ro"].is_boolean()) return Bad(where + ".ro: expected true or false");
    ro = m["ro"].get<bool>();
  }
  if (auto r = CheckDestination(*dst, where + ".dst")) return *r;
  auto resolved = ResolveMountSource(*src, where + ".src", config);
  if (auto* refused = std::get_if<Refused>(&resolved)) return *refused;
  Mount mount = std::get<Mount>(std::move(resolved));
  mount.destination = *dst;
  while (mount.destination.size() > 1 && mount.destination.back() == '/') mount.destination.pop_back();
  mount.read_only = ro;
  return mount;
}

// What the container runs: args, entrypoint, env and workdir.
std::optional<Refused> ParseCommand(const json& req, RunRequest& run) {
  if (req.contains("args")) {
    const auto& args = req["args"];
    if (!args.is_array()) return Bad("args: expected an array of strings");
    if (args.size() > kMaxArgs) return Bad("args: more than " + std::to_string(kMaxArgs) + " entries");
    for (size_t i = 0; i < args.size(); ++i) {
      auto a = Text(args[i]);
      if (!a) return Bad("args[" + std::to_string(i) + "]: expected a string without NUL");
      run.args.push_back(*a);
    }
  }
  if (req.contains("entrypoint") && !req["entrypoint"].is_null()) {
    const auto& ep = req["entrypoint"];
    std::vector<std::string> parts;
    if (ep.is_string()) {
      auto s = Text(ep);
      if (!s || s->empty()) return Bad("entrypoint: expected a non-empty string or array of strings");
      parts.push_back(*s);
    } else if (ep.is_array() && !ep.empty() && ep.size() <= kMaxArgs) {
      for (size_t i = 0; i < ep.size(); ++i) {
        auto s = Text(ep[i]);
        if (!s) return Bad("entrypoint[" + std::to_string(i) + "]: expected a string without NUL");
        parts.push_back(*s);
      }
    } else {
      return Bad("entrypoint: expected a non-empty string or array of strings");
    }
    run.entrypoint = std::move(parts);
  }
  if (req.contains("env")) {
    const auto& env = req["env"];
    if (!env.is_object()) return Bad("env: expected an object of strings");
    if (env.size() > kMaxEnv) return Bad("env: more than " + std::to_string(kMaxEnv) + " entries");
    for (const auto& [name, value] : env.items()) {
      const bool name_ok =
          !name.empty() && name.size() <= 256 && !Digit(name[0]) && std::all_of(name.begin(), name.end(), [](char c) {
            return Lower(c) || Digit(c) || c == '_' || (c >= 'A' && c <= 'Z');
          });
      if (!name_ok) return Bad("env: " + name.substr(0, 64) + ": expected a name of letters, digits and '_'");
      auto v = Text(value);
      if (!v) return Bad("env." + name + ": expected a string without NUL");
      run.env[name] = *v;
    }
  }
  if (req.contains("workdir") && !req["workdir"].is_null()) {
    auto w = Text(req["workdir"]);
    if (!w || w->empty() || w->front() != '/') return Bad("workdir: expected a POSIX absolute path");
    run.workdir = *w;
  }
  return std::nullopt;
}

// mounts: each below the work or data directory, each destination once.
std::optional<Refused> ParseMounts(const json& req, const BrokerConfig& config, RunRequest& run) {
  if (req.contains("mounts")) {
    const auto& mounts = req["mounts"];
    if (!mounts.is_array()) return Bad("mounts: expected an array");
    if (mounts.size() > kMaxMounts) return Bad("mounts: more than " + std::to_string(kMaxMounts) + " entries");
    std::set<std::string> destinations;
    for (size_t i = 0; i < mounts.size(); ++i) {
      auto m = ParseMount(mounts[i], i, config);
      if (auto* refused = std::get_if<Refused>(&m)) return *refused;
      Mount mount = std::get<Mount>(std::move(m));
      if (!destinations.insert(mount.destination).second)
        return BadMount("mounts[" + std::to_string(i) + "].dst: " + mount.destination + " is mounted twice");
      run.mounts.push_back(std::move(mount));
    }
  }
  return std::nullopt;
}

// network: none, or egress where the job has that grant; never the host's.
std::optional<Refused> ParseNetwork(const json& req, const BrokerConfig& config, RunRequest& run) {
  if (req.contains("network") && !req["network"].is_null()) {
    const auto& n = req["network"];
    std::string mode;
    if (n.is_boolean())
      mode = n.get<bool>() ? "egress" : "none";
    else if (auto s = Text(n))
      mode = *s;
    else
      return Bad("network: expected \"none\" or \"egress\"");
    if (mode == "host") return Refused{Refusal::kNetworkNotGranted, "network: host networking is never granted"};
    if (mode != "none" && mode != "egress") return Bad("network: expected \"none\" or \"egress\"");
    if (mode == "egress" && !config.network_granted)
      return Refused{Refusal::kNetworkNotGranted, "network: this job has no egress grant"};
    run.network = mode == "egress";
  }
  return std::nullopt;
}

// timeout_s, cpus and mem_gb: within the job's reservation and what the
// runtime can express.
std::optional<Refused> ParseLimits(const json& req, const BrokerConfig& config, RunRequest& run) {
  if (!req.contains("timeout_s")) return Bad("timeout_s: required");
  auto t = Number(req["timeout_s"], "timeout_s", kMinTimeoutS, config.max_timeout_s, "the broker's maximum",
                  "the runtime's timeout counts whole seconds");
  if (auto* r = std::get_if<Refused>(&t)) return *r;
  run.timeout_s = std::get<double>(t);
  run.cpus = config.cpus;
  run.mem_gb = config.mem_gb;
  if (req.contains("cpus") && !req["cpus"].is_null()) {
    auto c = Number(req["cpus"], "cpus", kMinCpus, config.cpus, "the job's reservation",
                    "a CFS quota of 1000 us per 100000 us period");
    if (auto* r = std::get_if<Refused>(&c)) return *r;
    run.cpus = std::get<double>(c);
  }
  if (req.contains("mem_gb") && !req["mem_gb"].is_null()) {
    auto m = Number(req["mem_gb"], "mem_gb", static_cast<double>(kMinMemoryBytes) / (1 << 30), config.mem_gb,
                    "the job's reservation", "6 MiB, the least Podman accepts");
    if (auto* r = std::get_if<Refused>(&m)) return *r;
    run.mem_gb = std::get<double>(m);
  }
  run.cpu_quota_us = CpuQuotaUs(run.cpus);
  run.memory_bytes = MemoryBytes(run.mem_gb);
  // Never reached past the minimums above; a limit of 0 would be no limit.
  if (run.cpu_quota_us <= 0) return Bad("cpus: below the smallest allowed value 0.01");
  if (run.memory_bytes <= 0) return Bad("mem_gb: below the smallest allowed value (6 MiB)");
  return std::nullopt;
}

std::variant<Request, Refused> ParseRun(const json& req, const BrokerConfig& config) {
  if (auto r = CheckKeys(req,
                         {"op", "image", "platform", "args", "entrypoint", "mounts", "env", "workdir", "network",
                          "timeout_s", "cpus", "mem_gb"},
                         ""))
    return *r;
  RunRequest run;
  if (auto r = CheckImage(req, run.image, run.platform, config)) return *r;
  if (auto r = ParseCommand(req, run)) return *r;
  if (auto r = ParseMounts(req, config, run)) return *r;
  if (auto r = ParseNetwork(req, config, run)) return *r;
  if (auto r = ParseLimits(req, config, run)) return *r;
  return Request{std::move(run)};
}

}  // namespace

const char* RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kBadRequest: return "bad_request";
    case Refusal::kImageNotApproved: return "image_not_approved";
    case Refusal::kBadMount: return "bad_mount";
    case Refusal::kNetworkNotGranted: return "network_not_granted";
    case Refusal::kRuntimeUnavailable: return "runtime_unavailable";
    case Refusal::kPlatformUnavailable: return "platform_unavailable";
    case Refusal::kReservationExhausted: return "reservation_exhausted";
  }
  return "?";
}

long long CpuQuotaUs(double cpus) {
  if (!std::isfinite(cpus) || cpus <= 0 || cpus > 1e6) return 0;
  // floor, then one step down if rounding of the product went up.
  long long q = static_cast<long long>(std::floor(cpus * kCpuPeriodUs));
  while (q > 0 && static_cast<double>(q) / kCpuPeriodUs > cpus) --q;
  return q >= kMinCpuQuotaUs ? q : 0;
}

long long MemoryBytes(double mem_gb) {
  if (!std::isfinite(mem_gb) || mem_gb <= 0 || mem_gb > (1 << 20)) return 0;
  long long b = static_cast<long long>(std::floor(mem_gb * (1ll << 30)));
  b -= b % 4096;
  while (b > 0 && static_cast<double>(b) / (1ll << 30) > mem_gb) b -= 4096;
  return b >= kMinMemoryBytes ? b : 0;
}

std::string DestinationProblem(const std::string& dst) {
  if (dst.empty() || dst.front() != '/') return "expected a POSIX absolute path";
  if (dst.size() > 4096) return "longer than 4096 bytes";
  for (unsigned char c : dst)
    if (c < 0x20 || c == 0x7f || c == ':' || c == ',' || c == '\\')
      return "contains a control character, ':', ',' or '\\'";
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= dst.size()) {
    const size_t end = std::min(dst.find('/', start), dst.size());
    const std::string part = dst.substr(start, end - start);
    if (part == "..") return "has a '..' component";
    if (part == ".") return "has a '.' component";
    if (part.empty() && end != dst.size()) return "has an empty component";
    if (!part.empty()) parts.push_back(part);
    start = end + 1;
  }
  if (parts.empty()) return "cannot mount over the container's root";
  std::string normal;
  for (const auto& p : parts) normal += "/" + p;
  for (const char* tree : {"proc", "sys", "dev"})
    if (parts[0] == tree)
      return normal + " is " + (parts.size() == 1 ? "" : "below ") + "/" + tree +
             ", which the runtime provides: /proc, /sys, /dev and anything below them are never mount destinations";
  for (const char* own : kRuntimeDestinations) {
    const std::string o = own;
    if (normal == o || normal.rfind(o + "/", 0) == 0)
      return normal + " is a path the runtime provides itself (" + o + ")";
  }
  return "";
}

bool IsDigestPinned(std::string_view reference) {
  const auto at = reference.find("@sha256:");
  if (at == std::string_view::npos || at == 0) return false;
  const auto hex = reference.substr(at + 8);
  if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), HexLower)) return false;
  const auto name = reference.substr(0, at);
  if (!(Lower(name.front()) || Digit(name.front()))) return false;  // never an option-like "-..."
  return std::all_of(name.begin(), name.end(), [](char c) {
    return Lower(c) || Digit(c) || c == '.' || c == '-' || c == '_' || c == '/' || c == ':';
  });
}

bool IsPlatform(std::string_view platform) {
  int parts = 1;
  if (platform.empty() || platform.front() == '/' || platform.back() == '/') return false;
  for (size_t i = 0; i < platform.size(); ++i) {
    const char c = platform[i];
    if (c == '/') {
      if (platform[i - 1] == '/') return false;
      ++parts;
    } else if (!(Lower(c) || Digit(c) || c == '_' || c == '-')) {
      return false;
    }
  }
  return parts == 2 || parts == 3;
}

std::string HostPlatform() {
  utsname u{};
  uname(&u);
  const std::string m = u.machine;
  if (m == "x86_64") return "linux/amd64";
  if (m == "aarch64") return "linux/arm64";
  if (m == "i686" || m == "i386") return "linux/386";
  if (m == "riscv64") return "linux/riscv64";
  if (m == "s390x") return "linux/s390x";
  if (m == "ppc64le") return "linux/ppc64le";
  return "linux/" + m;
}

std::variant<Mount, Refused> ResolveMountSource(const std::string& src, const std::string& field,
                                                const BrokerConfig& config) {
  std::string base = config.work_dir;
  std::string rel = src;
  if (src.rfind("data:", 0) == 0) {
    if (config.data_dir.empty()) return BadMount(field + ": this job has no data directory");
    base = config.data_dir;
    rel = src.substr(5);
  }
  if (auto why = CheckPortablePath(rel)) return BadMount(field + ": " + src.substr(0, 256) + " " + *why);
  if (rel == ".") rel.clear();
  UniqueFd fd(open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return BadMount(field + ": " + base + ": " + strerror(errno));
  if (!rel.empty()) {
    // No link followed, the last component's included (ELOOP), never out of
    // `base`, never across a mount; openat2 or the walk that stands for it.
    const int below = OpenNoSymlinksAt(fd.get(), rel.c_str(), O_PATH, /*no_xdev=*/true, /*beneath=*/true);
    const int err = errno;
    fd.Reset(below);
    if (!fd.valid()) {
      if (err == ELOOP || err == EXDEV)
        return BadMount(field + ": " + src.substr(0, 256) +
                        " goes through a symlink or another mount: sources "
                        "never leave their directory");
      return BadMount(field + ": " + src.substr(0, 256) + ": " + strerror(err));
    }
  }
  struct stat st {};
  const int rc = fstat(fd.get(), &st);
  const int err = errno;
  if (rc != 0) return BadMount(field + ": " + strerror(err));
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return BadMount(field + ": " + src.substr(0, 256) + " is neither a directory nor a regular file");
  Mount m;
  m.base = base;
  m.relative = rel;
  m.source = rel.empty() ? base : base + "/" + rel;
  return m;
}

Parsed ParseRequest(std::string_view line, const BrokerConfig& config) {
  if (line.size() > kMaxRequestBytes) return Bad("request: longer than " + std::to_string(kMaxRequestBytes) + " bytes");
  const json req = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded()) return Bad("request: not valid JSON");
  if (!req.is_object()) return Bad("request: expected a JSON object");
  if (!req.contains("op")) return Bad("op: required (container.run, container.pull or status)");
  auto op = Text(req["op"]);
  if (!op) return Bad("op: expected a string");
  if (*op == "container.run") {
    auto r = ParseRun(req, config);
    if (auto* refused = std::get_if<Refused>(&r)) return *refused;
    return std::get<Request>(std::move(r));
  }
  if (*op == "container.pull") {
    if (auto r = CheckKeys(req, {"op", "image", "platform"}, "")) return *r;
    PullRequest pull;
    if (auto r = CheckImage(req, pull.image, pull.platform, config)) return *r;
    return Request{pull};
  }
  if (*op == "status") {
    if (auto r = CheckKeys(req, {"op"}, "")) return *r;
    return Request{StatusRequest{}};
  }
  return Bad("op: " + op->substr(0, 64) + " is not one of container.run, container.pull, status");
}

nlohmann::ordered_json RefusalJson(const Refused& refused) {
  nlohmann::ordered_json j;
  j["ok"] = false;
  j["error"] = RefusalName(refused.error);
  j["detail"] = refused.detail;
  return j;
}

std::string AnswerLine(const nlohmann::ordered_json& answer) {
  // Every answer says its format first; the members are the answer's.
  nlohmann::ordered_json line = {{"format", kBrokerReplyFormat}};
  for (const auto& [key, value] : answer.items())
    if (key != "format") line[key] = value;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace oarbank::broker
