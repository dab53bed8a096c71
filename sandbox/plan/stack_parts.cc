#include "sandbox/plan/stack_parts.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

#include "sandbox/common/read_file.h"
#include "sandbox/common/sha256.h"
#include "sandbox/common/subprocess.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

constexpr auto kLoaderTimeout = std::chrono::seconds(5);

bool ReadAt(int fd, void* buf, size_t n, off_t at) { return pread(fd, buf, n, at) == static_cast<ssize_t>(n); }

// The program interpreter (PT_INTERP) a 64-bit ELF file names: "" for a
// static executable; false when it is not such a file.
bool Interpreter(const std::string& path, std::string& interp, std::string& why) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = path + ": not a readable regular file";
    return false;
  }
  Elf64_Ehdr eh{};
  if (!ReadAt(fd.get(), &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256) {
    why = path + ": not a 64-bit ELF file";
    return false;
  }
  interp.clear();
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!ReadAt(fd.get(), &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph))) {
      why = path + ": truncated program headers";
      return false;
    }
    if (ph.p_type != PT_INTERP) continue;
    if (ph.p_filesz < 2 || ph.p_filesz > 4096) {
      why = path + ": a program interpreter of " + std::to_string(ph.p_filesz) + " bytes";
      return false;
    }
    std::string name(ph.p_filesz, '\0');
    if (!ReadAt(fd.get(), name.data(), name.size(), static_cast<off_t>(ph.p_offset)) || name.back() != '\0') {
      why = path + ": an unreadable program interpreter";
      return false;
    }
    name.pop_back();
    if (name.empty() || name[0] != '/') {
      why = path + ": program interpreter \"" + name + "\" is not an absolute path";
      return false;
    }
    interp = name;
  }
  return true;
}

}  // namespace

std::string FileVersionText(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
}

std::string FileDigest(const std::string& path, const KnownDigests& known, std::string* version) {
  std::string why;
  UniqueFd fd(OpenRegularFile(path, &why));
  struct stat st {};
  if (!fd.valid()) return "unreadable: " + why;
  if (fstat(fd.get(), &st) != 0) return "unreadable: " + path + ": " + strerror(errno);
  const std::string now = FileVersionText(st);
  if (version != nullptr) *version = now;
  if (auto it = known.find(path);
      it != known.end() && !it->second.version.empty() && it->second.version == now && it->second.sha256.size() == 64)
    return it->second.sha256;
  auto digest = Sha256HexOfFd(fd.get());
  return digest ? *digest : "unreadable: " + path + ": read failed";
}

bool ResolvedLibraries(const std::string& executable, std::vector<std::string>& libraries, std::string& why) {
  libraries.clear();
  std::string interp;
  if (!Interpreter(executable, interp, why)) return false;
  if (interp.empty()) return true;  // static
  SubprocessSpec spec;
  spec.argv = {interp, "--list", executable};
  CaptureLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + kLoaderTimeout;
  limits.max_bytes = 64 << 10;
  const CapturedRun run = RunCaptured(spec, limits);
  if (!run.started || run.timed_out || run.ExitCode() != 0) {
    why = interp + " --list " + executable + ": " +
          (!run.started    ? run.error
           : run.timed_out ? "timed out"
                           : "exit " + std::to_string(run.ExitCode())) +
          (run.err.empty() ? "" : ": " + run.err.substr(0, run.err.find('\n')));
    return false;
  }
  // "\tname => /path (0x...)", "\t/path (0x...)" for the loader, and the
  // vDSO ("\tlinux-vdso.so.1 (0x...)"), which is the kernel's.
  std::istringstream lines(run.out);
  std::set<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    if (line.find(" => not found") != std::string::npos) {
      why = executable + ": " + line.substr(0, line.find(' ')) + " not found by the dynamic loader";
      return false;
    }
    std::string path;
    if (const size_t arrow = line.find(" => "); arrow != std::string::npos) {
      path = line.substr(arrow + 4);
    } else {
      path = line;
    }
    path = path.substr(0, path.rfind(" ("));
    if (path.empty() || path[0] != '/') continue;  // the vDSO
    if (seen.insert(path).second) libraries.push_back(path);
  }
  return true;
}

std::map<std::string, std::string> StackLibraries(const std::vector<std::string>& programs, const KnownDigests& known,
                                                  std::map<std::string, std::string>* versions) {
  std::map<std::string, std::string> out;
  for (const auto& program : programs) {
    std::vector<std::string> libraries;
    std::string why;
    if (!ResolvedLibraries(program, libraries, why)) {
      out[program] = "unresolved: " + why;
      continue;
    }
    for (const auto& library : libraries) {
      if (out.contains(library)) continue;
      std::string version;
      out[library] = FileDigest(library, known, &version);
      if (versions != nullptr && !version.empty()) (*versions)[library] = version;
    }
  }
  return out;
}

const std::vector<std::string>& StackKernelModules() {
  // tun: the stack's tap device. The rest: nf_tables and its netlink, the
  // refusal (reject), connection tracking (ct state) and the DNS redirect
  // (dnat) of the job's ruleset.
  static const std::vector<std::string> names = {
      "tun",     "nfnetlink",     "nf_tables",  "nf_conntrack",    "nf_nat",         "nft_ct",
      "nft_nat", "nft_chain_nat", "nft_reject", "nft_reject_inet", "nf_reject_ipv4", "nf_reject_ipv6",
  };
  return names;
}

std::map<std::string, std::string> KernelModuleStates(const std::vector<std::string>& names,
                                                      const std::string& modules_dir, bool loadable_modules) {
  std::map<std::string, std::string> out;
  if (!loadable_modules) {
    for (const auto& name : names) out[name] = "no loadable modules";
    return out;
  }
  // A module's file name has '-' where its name may have '_'.
  auto key = [](std::string name) {
    for (char& c : name)
      if (c == '-') c = '_';
    return name;
  };
  // "kernel/net/netfilter/nf_tables.ko[.xz]" -> "nf_tables".
  auto module_of = [&](const std::string& path) {
    std::string base = path.substr(path.rfind('/') + 1);
    base = base.substr(0, base.find(".ko"));
    return key(base);
  };
  std::map<std::string, std::string> builtin, files;
  // No module tree at all (a kernel built with every module it has, and
  // none installed): nothing can be loaded from it, and the kernel's
  // version says what is built in.
  struct stat tree {};
  if (lstat(modules_dir.c_str(), &tree) != 0 && errno == ENOENT) {
    for (const auto& name : names) out[name] = "no module tree";
    return out;
  }
  for (const char* index : {"modules.builtin", "modules.dep"}) {
    const HostFile f = ReadHostFile(modules_dir + "/" + index, 16 << 20);
    if (f.status != HostFileStatus::kRead) {
      for (const auto& name : names) out[name] = "unreadable: " + f.why;
      return out;
    }
    std::istringstream lines(f.text);
    for (std::string line; std::getline(lines, line);) {
      const std::string path = line.substr(0, line.find(':'));
      if (path.empty()) continue;
      (std::string(index) == "modules.builtin" ? builtin : files)[module_of(path)] = path;
    }
  }
  for (const auto& name : names) {
    const std::string k = key(name);
    if (builtin.contains(k)) {
      out[name] = "builtin";
    } else if (auto it = files.find(k); it != files.end()) {
      const std::string digest = FileDigest(modules_dir + "/" + it->second);
      out[name] = digest.starts_with("unreadable") ? digest : "sha256 " + digest;
    } else {
      out[name] = "absent";
    }
  }
  return out;
}

std::map<std::string, std::string> StackKernelModuleStates() {
  struct utsname u {};
  uname(&u);
  struct stat st {};
  const bool loadable = stat("/proc/modules", &st) == 0;
  return KernelModuleStates(StackKernelModules(), std::string("/lib/modules/") + u.release, loadable);
}

bool IsBindableState(const std::string& state) {
  return !state.starts_with("unresolved") && !state.starts_with("unreadable");
}

}  // namespace oarbank
