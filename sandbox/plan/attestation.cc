#include "sandbox/plan/attestation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <tuple>
#include <utility>

#include "sandbox/common/read_file.h"
#include "sandbox/common/sha256.h"
#include "sandbox/common/trust_file.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/plan/battery_identity.h"
#include "sandbox/plan/stack_parts.h"

namespace oarbank {
namespace {

// The digest and the stat of one open file, so both describe the same inode.
std::pair<std::string, std::string> LauncherSha256(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0) return {"", ""};
  return {Sha256HexOfFd(fd.get()).value_or(""), FileVersionText(st)};
}

// The running executable's digest, computed once per process: it cannot
// change under a running process (ETXTBSY).
const std::string& SelfSha256() {
  static std::once_flag once;
  static std::string digest;
  std::call_once(once, [] { digest = LauncherSha256("/proc/self/exe").first; });
  return digest;
}

std::string KernelVersion() {
  std::string text = ReadFileUpTo("/proc/version", 4096).value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The attested job network digests with the version each was taken at:
// the stack and the helper at the paths the host names now, the libraries
// at theirs.
KnownDigests KnownJobNetworkDigests(const AttestationBinding& attested, const HostFacts& host) {
  KnownDigests known;
  auto add = [&](const std::string& path, const std::string& digest) {
    auto version = attested.stack_file_versions.find(path);
    if (!path.empty() && version != attested.stack_file_versions.end()) known[path] = {version->second, digest};
  };
  add(host.job_network.stack_path, attested.stack_sha256);
  add(host.job_network.helper_path, attested.helper_sha256);
  for (const auto& [path, digest] : attested.stack_libraries) add(path, digest);
  return known;
}

// The first part of the binding that differs, as "<part> (attested: X; here: Y)".
std::string BindingDifference(const AttestationBinding& a, const AttestationBinding& here) {
  auto differs = [](const char* part, const std::string& attested, const std::string& now) {
    return std::string(part) + " differs (attested: " + (attested.empty() ? "none" : attested) +
           "; here: " + (now.empty() ? "none" : now) + ")";
  };
  if (a.kernel_release != here.kernel_release) return differs("kernel.release", a.kernel_release, here.kernel_release);
  if (a.kernel_version != here.kernel_version) return differs("kernel.version", a.kernel_version, here.kernel_version);
  if (a.landlock_abi != here.landlock_abi)
    return differs("kernel.landlock_abi", std::to_string(a.landlock_abi), std::to_string(here.landlock_abi));
  if (a.landlock_errata != here.landlock_errata)
    return differs("kernel.landlock_errata", std::to_string(a.landlock_errata), std::to_string(here.landlock_errata));
  // The very file that was hashed needs no second digest (launcher_stat).
  if (a.launcher_stat.empty() || a.launcher_stat != here.launcher_stat) {
    const std::string& digest =
        here.launcher_sha256.empty() && here.launcher_path == "/proc/self/exe" ? SelfSha256() : here.launcher_sha256;
    if (digest.empty()) return "launcher.sha256: the running launcher cannot be read to hash it";
    if (a.launcher_sha256 != digest) return differs("launcher.sha256", a.launcher_sha256, digest);
  }
  if (a.battery_sha256 != here.battery_sha256) return differs("battery.sha256", a.battery_sha256, here.battery_sha256);
  return "";
}

// The first part of `what` (a library, a kernel module) that cannot be
// bound here or differs from the attested one; "" when every part matches.
std::string PartsDifference(const char* what, const std::map<std::string, std::string>& attested,
                            const std::map<std::string, std::string>& here) {
  auto none = [](const std::string& s) { return s.empty() ? std::string("none") : s; };
  if (here.empty()) return std::string(what) + ": none could be listed here: run oarbank-conform again";
  for (const auto& [part, state] : here)
    if (!IsBindableState(state)) return std::string(what) + " " + part + ": " + state;
  for (const auto& [part, state] : here) {
    auto it = attested.find(part);
    const std::string was = it == attested.end() ? "" : it->second;
    if (was != state)
      return std::string(what) + " " + part + " differs (attested: " + none(was) + "; here: " + state +
             "): run oarbank-conform again";
  }
  for (const auto& [part, state] : attested)
    if (!here.contains(part))
      return std::string(what) + " " + part + " differs (attested: " + none(state) +
             "; here: none): run oarbank-conform again";
  return "";
}

}  // namespace

std::string AttestationPath() {
  const char* env = getenv("OARBANK_BATTERY_ATTESTATION");
  return env && *env ? env : kDefaultAttestationPath;
}

std::string PolicyClass(const Policy& policy) {
  const char* gpu = "none";
  switch (policy.gpu()) {
    case GpuMode::kNone: break;
    case GpuMode::kCompute: gpu = "compute"; break;
  }
  return std::string(RoleName(policy.role())) + " net=" + NetModeName(policy.net().mode) +
         " exec_writable=" + (policy.exec_writable() ? "true" : "false") + " gpu=" + gpu +
         " broker=" + (policy.broker() ? "yes" : "no") +
         // A class without the job's own sockets keeps its name from before ipc existed.
         (policy.ipc() == IpcMode::kJob ? " ipc=job" : "") + (policy.debug() ? " debug=yes" : "");
}

std::string BatterySha256() { return OARBANK_BATTERY_SHA256; }

const std::vector<BatteryFile>& BatteryFiles() {
  static const std::vector<BatteryFile> files = {OARBANK_BATTERY_FILES};
  return files;
}

AttestationBinding BindingFor(const HostFacts& host, const std::string& launcher_path,
                              const AttestationBinding* attested) {
  AttestationBinding b;
  const KnownDigests known = attested != nullptr ? KnownJobNetworkDigests(*attested, host) : KnownDigests{};
  // A part that cannot be read is "" (as before the libraries were bound).
  auto program = [&](const std::string& path, std::string& digest) {
    if (path.empty()) return;
    std::string version;
    digest = FileDigest(path, known, &version);
    if (digest.starts_with("unreadable")) digest.clear();
    if (!version.empty()) b.stack_file_versions[path] = version;
  };
  program(host.job_network.stack_path, b.stack_sha256);
  program(host.job_network.helper_path, b.helper_sha256);
  if (!host.job_network.stack_path.empty()) {
    std::vector<std::string> programs = {host.job_network.stack_path};
    if (!host.job_network.helper_path.empty()) programs.push_back(host.job_network.helper_path);
    b.stack_libraries = StackLibraries(programs, known, &b.stack_file_versions);
    b.stack_modules = StackKernelModuleStates();
  }
  b.kernel_release = host.kernel_release;
  b.kernel_version = KernelVersion();
  b.landlock_abi = host.landlock_abi;
  b.landlock_errata = host.landlock_errata;
  if (!launcher_path.empty()) std::tie(b.launcher_sha256, b.launcher_stat) = LauncherSha256(launcher_path);
  b.battery_sha256 = BatterySha256();
  return b;
}

AttestationBinding BindingForThisProcess(const HostFacts& host, LauncherHash hash, const AttestationBinding* attested) {
  AttestationBinding b = BindingFor(host, "", attested);
  struct stat st;
  if (stat("/proc/self/exe", &st) == 0) b.launcher_stat = FileVersionText(st);
  b.launcher_path = "/proc/self/exe";
  if (hash == LauncherHash::kNow) b.launcher_sha256 = SelfSha256();
  return b;
}

namespace {

// The attestation at `path` as written, not yet held against this host:
// `detail` says why when it cannot be read or is not one.
Attestation ParseAttestation(const std::string& path) {
  Attestation a;
  auto text = ReadTrustedFile(path);
  if (!text.ok()) {
    a.detail = "battery attestation " + path + ": " + text.error().what;
    return a;
  }
  if (!text.value()) {
    a.detail = "no battery attestation at " + path + ": run oarbank-conform on this host first";
    return a;
  }
  const auto j = nlohmann::json::parse(*text.value(), nullptr, /*allow_exceptions=*/false);
  auto str = [&](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  auto num = [&](const nlohmann::json& o, const char* key) -> int64_t {
    return o.is_object() && o.contains(key) && o[key].is_number_integer() ? o[key].get<int64_t>() : -1;
  };
  // An object of strings; a member of another type is kept as "" (it then
  // matches no digest and no state).
  auto strings = [&](const nlohmann::json& o, const char* key) {
    std::map<std::string, std::string> out;
    if (!o.is_object() || !o.contains(key) || !o[key].is_object()) return out;
    for (const auto& [k, v] : o[key].items()) out[k] = v.is_string() ? v.get<std::string>() : "";
    return out;
  };
  if (!j.is_object() || str(j, "format") != kAttestationFormat || !j.contains("proven_classes") ||
      !j["proven_classes"].is_array()) {
    a.detail = path + " is not a battery attestation (" + kAttestationFormat + "): run oarbank-conform again";
    return a;
  }
  const nlohmann::json kernel = j.value("kernel", nlohmann::json::object());
  const nlohmann::json network = j.value("job_network", nlohmann::json::object());
  a.binding.kernel_release = str(kernel, "release");
  a.binding.kernel_version = str(kernel, "version");
  a.binding.landlock_abi = static_cast<int>(num(kernel, "landlock_abi"));
  a.binding.landlock_errata = static_cast<uint32_t>(num(kernel, "landlock_errata"));
  a.binding.launcher_sha256 = str(j.value("launcher", nlohmann::json::object()), "sha256");
  a.binding.launcher_stat = str(j.value("launcher", nlohmann::json::object()), "stat");
  a.binding.battery_sha256 = str(j.value("battery", nlohmann::json::object()), "sha256");
  a.binding.stack_sha256 = str(network, "stack_sha256");
  a.binding.helper_sha256 = str(network, "helper_sha256");
  a.binding.stack_libraries = strings(network, "libraries");
  a.binding.stack_modules = strings(network, "kernel_modules");
  a.binding.stack_file_versions = strings(network, "file_versions");
  for (const auto& c : j["proven_classes"])
    if (c.is_string()) a.proven_classes.push_back(c.get<std::string>());
  return a;
}

// `a` (parsed) held against `here`: present only when the binding matches.
Attestation HeldAgainst(Attestation a, const std::string& path, const AttestationBinding& here) {
  a.stack_sha256_here = here.stack_sha256;
  a.helper_sha256_here = here.helper_sha256;
  a.stack_libraries_here = here.stack_libraries;
  a.stack_modules_here = here.stack_modules;
  if (auto diff = BindingDifference(a.binding, here); !diff.empty()) {
    a.detail = "the battery attestation " + path + " does not apply: " + diff + ": run oarbank-conform again";
    a.proven_classes.clear();
    return a;
  }
  a.present = true;
  return a;
}

}  // namespace

Attestation ReadAttestation(const std::string& path, const AttestationBinding& here) {
  Attestation a = ParseAttestation(path);
  if (!a.detail.empty()) return a;
  return HeldAgainst(std::move(a), path, here);
}

Attestation ReadAttestationForThisProcess(const std::string& path, const HostFacts& host) {
  Attestation a = ParseAttestation(path);
  if (!a.detail.empty()) return a;
  const AttestationBinding here = BindingForThisProcess(host, LauncherHash::kWhenNeeded, &a.binding);
  return HeldAgainst(std::move(a), path, here);
}

std::string ProofGap(const Attestation& a, const Policy& policy) {
  const std::string cls = PolicyClass(policy);
  if (!a.present) return "battery.proven: class \"" + cls + "\" is not proven: " + a.detail;
  if (std::find(a.proven_classes.begin(), a.proven_classes.end(), cls) == a.proven_classes.end())
    return "battery.proven: the battery has not passed for the class \"" + cls +
           "\" on this host: no policy of that class was run, or one failed";
  if (policy.net().mode == NetMode::kEgressAny) {
    // The stack and the helper enforce egress-any: the ones proven, or none.
    auto differs = [&](const char* part, const std::string& attested, const std::string& here) {
      return "battery.proven: the class \"" + cls + "\" was proven with another job network: " + part +
             " differs (attested: " + (attested.empty() ? "none" : attested) +
             "; here: " + (here.empty() ? "none" : here) + "): run oarbank-conform again";
    };
    if (a.binding.stack_sha256.empty() || a.binding.stack_sha256 != a.stack_sha256_here)
      return differs("job_network.stack_sha256 (slirp4netns)", a.binding.stack_sha256, a.stack_sha256_here);
    if (a.binding.helper_sha256.empty() || a.binding.helper_sha256 != a.helper_sha256_here)
      return differs("job_network.helper_sha256 (oarbank-netfilter)", a.binding.helper_sha256, a.helper_sha256_here);
    if (auto gap = PartsDifference("job_network.libraries", a.binding.stack_libraries, a.stack_libraries_here);
        !gap.empty())
      return "battery.proven: the class \"" + cls + "\" was proven with another job network: " + gap;
    if (auto gap = PartsDifference("job_network.kernel_modules", a.binding.stack_modules, a.stack_modules_here);
        !gap.empty())
      return "battery.proven: the class \"" + cls + "\" was proven with another job network: " + gap;
  }
  return "";
}

std::string VersionText(const std::string& program, const std::string& launcher_path) {
  const std::string launcher = LauncherSha256(launcher_path).first;
  return program + " " + OARBANK_VERSION + "\nlauncher sha256 " + (launcher.empty() ? "unreadable" : launcher) + " (" +
         launcher_path + ")\nbattery sha256 " + BatterySha256();
}

nlohmann::ordered_json AttestationJson(const Attestation& a) {
  const AttestationBinding& b = a.binding;
  return {{"format", kAttestationFormat},
          {"kernel",
           {{"release", b.kernel_release},
            {"version", b.kernel_version},
            {"landlock_abi", b.landlock_abi},
            {"landlock_errata", b.landlock_errata}}},
          {"launcher", {{"sha256", b.launcher_sha256}, {"stat", b.launcher_stat}}},
          {"battery", {{"sha256", b.battery_sha256}}},
          {"job_network",
           {{"stack_sha256", b.stack_sha256},
            {"helper_sha256", b.helper_sha256},
            {"libraries", b.stack_libraries},
            {"kernel_modules", b.stack_modules},
            {"file_versions", b.stack_file_versions}}},
          {"proven_classes", a.proven_classes}};
}

std::string WriteAttestation(const std::string& path, const Attestation& a) {
  if (auto err = WriteTrustedFile(path, AttestationJson(a).dump(2) + "\n", 0644)) return err->what;
  return "";
}

}  // namespace oarbank
