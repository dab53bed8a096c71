// Cage-before-capability: a supervised job runs only a policy class that
// the escape battery has proven on this host. oarbank-conform writes the
// attestation after a complete run of the shipped battery; the supervisor
// (supervisor.h) refuses any job whose class it does not prove, and the
// enforcement report prints the same verdict.
//
// An attestation binds:
//   - the kernel: `uname -r`, the whole of /proc/version (build number and
//     date, compiler), the Landlock ABI and its errata;
//   - the launcher: the SHA-256 of the binary the battery drove. Launch
//     steps run in the supervising process itself (forked, not re-exec'd),
//     so the launcher of a job is the running executable, /proc/self/exe;
//   - the battery: the SHA-256 over its probe sources, expectations table
//     and policies, fixed at build time (kBatterySha256) and compiled into
//     both oarbank-conform and oarbank-agent;
//   - for the egress-any classes alone, the job network: the SHA-256 of the
//     user-mode stack (slirp4netns) and of the nftables helper
//     (oarbank-netfilter) the battery's egress-any jobs ran, which enforce
//     that class as much as the launcher does.
// Any difference and the attestation proves nothing (the job network's:
// no egress-any class); the reason names the part that differs. The file is a trust file (trust_file.h): read only when
// nobody but root (or the agent's uid) can have written it, written
// atomically with mode 0644.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/common/install_paths.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

inline constexpr const char* kAttestationFormat = "oarbank.attestation/1";

// Where the attestation lives: $OARBANK_BATTERY_ATTESTATION, else this.
// A path from the environment passes the same trust checks.
inline constexpr const char* kDefaultAttestationPath = OARBANK_STATE_DIR "/battery-attestation.json";
std::string AttestationPath();

// The features that decide which cage a policy gets: role, network mode,
// exec_writable, GPU, broker. Two policies of one class differ only in paths.
std::string PolicyClass(const Policy& policy);

// The battery this build carries: SHA-256 over "<sha256>  <path>\n" lines
// (sha256sum's format, sorted by path) of its probe sources, expectations
// and policies, and those files with their digests.
std::string BatterySha256();
struct BatteryFile {
  const char* path;  // relative to the source tree
  const char* sha256;
};
const std::vector<BatteryFile>& BatteryFiles();

// What an attestation must match.
struct AttestationBinding {
  std::string kernel_release;
  std::string kernel_version;  // /proc/version, whole
  int landlock_abi = 0;
  uint32_t landlock_errata = 0;
  std::string launcher_sha256;
  // The launcher file's "dev:ino:size:mtime_ns:ctime_ns" when it was hashed.
  // A launcher whose file has exactly these is the file that was hashed
  // (any write, rename or chmod changes them, and nobody sets a ctime), so
  // its digest is not computed again; any other file is hashed and its
  // digest decides.
  std::string launcher_stat;
  // Set, with launcher_sha256 empty, when the digest is computed only if
  // the stat differs (LauncherHash::kWhenNeeded).
  std::string launcher_path;
  std::string battery_sha256;
  // The job network's parts (HostFacts::JobNetworkFacts), "" when not
  // hashed (no egress-any question) or unreadable.
  std::string stack_sha256, helper_sha256;
  // What those two run on (stack_parts.h): each shared library the loader
  // resolves for them, path -> SHA-256, and each kernel module the job
  // network relies on, name -> state. Empty when not hashed.
  std::map<std::string, std::string> stack_libraries, stack_modules;
  // The version (FileVersionText) of each file hashed for the job network,
  // the stack, the helper and the libraries: path -> version. The gate
  // takes an attested digest for a file that still has its attested
  // version, and hashes any other.
  std::map<std::string, std::string> stack_file_versions;
};

// This host as `host` found it, the launcher at `launcher_path` and this
// build's battery. The launcher's digest is "" when it cannot be read; the
// job network's parts are hashed when `host.job_network` names them.
// With `attested`, a job network file that still has its attested version
// (stack_file_versions) takes its attested digest instead of being hashed.
AttestationBinding BindingFor(const HostFacts& host, const std::string& launcher_path,
                              const AttestationBinding* attested = nullptr);
// The same for the running executable, hashed at most once per process:
// at once (to write an attestation), or only when an attestation's
// launcher_stat does not match it (to check one: a `run` then reads no
// more of its own binary than its stat).
enum class LauncherHash { kNow, kWhenNeeded };
AttestationBinding BindingForThisProcess(const HostFacts& host, LauncherHash hash = LauncherHash::kNow,
                                         const AttestationBinding* attested = nullptr);

struct Attestation {
  bool present = false;  // read, trusted, and bound to what was asked
  std::string detail;    // why it proves nothing, when it does not
  AttestationBinding binding;
  std::vector<std::string> proven_classes;
  // The job network's parts here, from ReadAttestation's `here`: ProofGap
  // holds an egress-any class proven only when they are the attested ones.
  std::string stack_sha256_here, helper_sha256_here;
  std::map<std::string, std::string> stack_libraries_here, stack_modules_here;
};

// Reads the attestation at `path` and keeps its classes only if it is a
// trusted file whose binding equals `here`.
Attestation ReadAttestation(const std::string& path, const AttestationBinding& here);
// The gate's read: the attestation at `path` against this process and
// `host`, hashing only the files whose version differs from the attested
// one (the launcher, the job network's parts).
Attestation ReadAttestationForThisProcess(const std::string& path, const HostFacts& host);

// Whether `attestation` proves `policy`'s class: "" when it does, else why
// not, naming battery.proven and the class.
std::string ProofGap(const Attestation& attestation, const Policy& policy);

// For --version: "<program> <version>", then the SHA-256 of the launcher
// at `launcher_path` and of this build's battery, the identities an
// attestation binds.
std::string VersionText(const std::string& program, const std::string& launcher_path);

nlohmann::ordered_json AttestationJson(const Attestation& attestation);
// Atomic, mode 0644, never through a link (trust_file.h). "" or why not.
std::string WriteAttestation(const std::string& path, const Attestation& attestation);

}  // namespace oarbank
