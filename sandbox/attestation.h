// Cage-before-capability: a capability that runs module code (a shell tool,
// a runner) is granted only on a host where the escape battery has passed,
// with this very launcher binary, on this very kernel, for the policy's
// class. oarbank-conform writes the attestation; the enforcement report and
// the supervisor's Available() read it. The launcher itself does not need
// it: it enforces whatever it is given, and refuses what it cannot enforce.
#pragma once

#include <string>
#include <vector>

#include "policy.h"

namespace oarbank {

// Where the attestation lives: $OARBANK_BATTERY_ATTESTATION, else this.
inline constexpr const char* kDefaultAttestationPath = "/var/lib/oarbank/battery-attestation.json";
std::string AttestationPath();

// The features that decide which cage a policy gets: role, network mode,
// exec_writable, GPU, broker. Two policies of one class differ only in paths.
std::string PolicyClass(const Policy& policy);

// A stable fingerprint of a file's bytes (FNV-1a 64, hex). Identifies the
// launcher binary the battery ran against; the file is root-owned, so this
// guards against a stale attestation, not against forgery.
std::string FileFingerprint(const std::string& path);

struct Attestation {
  bool present = false;
  std::string detail;  // why it does not apply, when it does not
  std::string kernel_release;
  int landlock_abi = 0;
  std::string agent_fingerprint;
  std::vector<std::string> proven_classes;
};

// Reads the attestation and keeps it only if it was made on this kernel
// release and Landlock ABI with the binary at `agent_path`.
Attestation ReadAttestation(const std::string& path, const std::string& kernel_release, int landlock_abi,
                            const std::string& agent_path);
bool WriteAttestation(const std::string& path, const Attestation& attestation);

}  // namespace oarbank
