#include "attestation.h"

#include "read_file.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace oarbank {

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
         " broker=" + (policy.broker() ? "yes" : "no");
}

std::string FileFingerprint(const std::string& path) {
  const int fd = OpenRegularFile(path, nullptr);
  if (fd < 0) return "";
  uint64_t hash = 0xcbf29ce484222325ull;
  char buf[1 << 16];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return "";
    }
    for (ssize_t i = 0; i < n; ++i) {
      hash ^= static_cast<unsigned char>(buf[i]);
      hash *= 0x100000001b3ull;
    }
  }
  close(fd);
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

Attestation ReadAttestation(const std::string& path, const std::string& kernel_release, int landlock_abi,
                            const std::string& agent_path) {
  Attestation a;
  std::string why;
  const auto text = ReadFileUpTo(path, 16u << 20, &why);
  if (!text) {
    a.detail = errno == ENOENT ? "no battery attestation at " + path + ": run oarbank-conform on this host"
                               : "cannot read the battery attestation " + path + ": " + why;
    return a;
  }
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("proven_classes") || !j["proven_classes"].is_array()) {
    a.detail = path + " is not a battery attestation";
    return a;
  }
  a.kernel_release = j.value("kernel_release", "");
  a.landlock_abi = j.value("landlock_abi", -1);
  a.agent_fingerprint = j.value("agent_fingerprint", "");
  if (a.kernel_release != kernel_release || a.landlock_abi != landlock_abi) {
    a.detail = "the battery ran on Linux " + a.kernel_release + " (Landlock ABI " + std::to_string(a.landlock_abi) +
               "), not on this kernel: run oarbank-conform again";
    return a;
  }
  if (a.agent_fingerprint != FileFingerprint(agent_path)) {
    a.detail = "the battery ran against another oarbank-agent binary: run oarbank-conform again";
    return a;
  }
  for (const auto& c : j["proven_classes"])
    if (c.is_string()) a.proven_classes.push_back(c.get<std::string>());
  a.present = true;
  return a;
}

bool WriteAttestation(const std::string& path, const Attestation& a) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const nlohmann::ordered_json j = {{"kernel_release", a.kernel_release},
                                    {"landlock_abi", a.landlock_abi},
                                    {"agent_fingerprint", a.agent_fingerprint},
                                    {"proven_classes", a.proven_classes}};
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  return static_cast<bool>(out);
}

}  // namespace oarbank
