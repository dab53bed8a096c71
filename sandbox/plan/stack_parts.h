// What an egress-any job network runs on besides its two programs: the
// shared libraries the dynamic loader resolves for them and the kernel
// modules its ruleset and tap device need. The battery attestation binds
// each, so an upgrade of libslirp or libnftables, or another build of a
// module under the same kernel release, makes the egress-any classes
// unproven until the battery runs again.
#pragma once

#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

namespace oarbank {

// A file version: "dev:ino:size:mtime_ns:ctime_ns". A file whose stat reads
// exactly this is the one that was hashed when it was recorded: a write, a
// chmod, a rename or a replacement changes one of them, and the kernel
// alone sets a ctime (to the current time), so only root, by changing the
// clock, could make another file match.
std::string FileVersionText(const struct stat& st);

// Digests recorded with the version of the file they were computed from
// (the attestation's job_network.file_stats): path -> {version, sha256}.
struct KnownDigest {
  std::string version;
  std::string sha256;
};
using KnownDigests = std::map<std::string, KnownDigest>;

// The SHA-256 (hex) of the regular file at `path`, or "unreadable: <why>".
// Where `known` records it at the version the file has now, that digest is
// taken and nothing is read; otherwise the file is hashed. `version` (when
// given) receives the version of the file opened.
std::string FileDigest(const std::string& path, const KnownDigests& known = {}, std::string* version = nullptr);

// The libraries the dynamic loader resolves for `executable`, by path, as
// it resolves them for the job network (an empty environment: no
// LD_LIBRARY_PATH or LD_PRELOAD), the loader itself included; none for a
// static executable. The loader is asked in list mode (`ld.so --list`,
// what ldd does), which maps the libraries without running any of their
// code: resolving by hand would mean rewriting the loader's search rules
// (RUNPATH, the cache, hwcaps subdirectories). False and `why` when the
// file is not an ELF executable or a library is not found.
bool ResolvedLibraries(const std::string& executable, std::vector<std::string>& libraries, std::string& why);

// Each library of the stack and the helper: path -> its SHA-256 (by
// FileDigest, with `known`), or "unresolved: <why>" under the program's own
// path when its libraries cannot be listed, or "unreadable: <why>".
// `versions` (when given) receives path -> version of each file hashed.
std::map<std::string, std::string> StackLibraries(const std::vector<std::string>& programs,
                                                  const KnownDigests& known = {},
                                                  std::map<std::string, std::string>* versions = nullptr);

// The kernel modules the job network relies on (the tap device, nf_tables
// and the expressions its ruleset uses).
const std::vector<std::string>& StackKernelModules();

// Each module's state under `modules_dir` (/lib/modules/<release>):
// "builtin" (modules.builtin lists it), "sha256 <hex>" (the file
// modules.dep names, compressed or not), "absent" (neither), "no module
// tree" (no `modules_dir` at all), or "unreadable: <why>" (a tree whose
// index cannot be read: nothing is taken as absent then). A kernel without loadable modules (no /proc/modules)
// gets "no loadable modules" for each: its release and version, which the
// attestation binds already, say what is built in.
std::map<std::string, std::string> KernelModuleStates(const std::vector<std::string>& names,
                                                      const std::string& modules_dir, bool loadable_modules);
std::map<std::string, std::string> StackKernelModuleStates();

// Whether a state from the two maps above describes something the
// attestation can bind (a digest, builtin, absent): an unresolved or
// unreadable part proves nothing.
bool IsBindableState(const std::string& state);

}  // namespace oarbank
