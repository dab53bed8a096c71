#include "sandbox/launch/enforce.h"

#include "sandbox/common/open_no_symlinks.h"

#include "sandbox/common/fault_hooks.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/launch/mount_namespace.h"

#include "sandbox/common/unique_fd.h"
#include "sandbox/seccomp/filter.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace oarbank {

int OpenNoSymlinks(const std::string& path) { return OpenNoSymlinksAt(AT_FDCWD, path.c_str(), O_PATH); }

bool IsInode(int fd, FileId expected) {
  struct stat st {};
  if (!expected.known() || FaultSkipStep("grant-inodes")) return true;
  return fstat(fd, &st) == 0 && IsInode(st, expected);
}

bool IsInode(const struct stat& st, FileId expected) {
  if (!expected.known() || FaultSkipStep("grant-inodes")) return true;
  return FileId{st.st_dev, st.st_ino} == expected;
}

namespace {

// The 6.1 headers know only handled_access_fs; these are the ABI 6 layouts.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};

std::optional<StepFailure> CloseInheritedFds(int keep) {
  // Close-on-exec rather than close: the launcher's own error pipe (if any)
  // must live until exec, and nothing survives exec but `keep`.
  if (keep > 2) {
    const bool below =
        keep == 3 || syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), CLOSE_RANGE_CLOEXEC) == 0;
    const int flags = fcntl(keep, F_GETFD);
    if (below && flags >= 0 && fcntl(keep, F_SETFD, flags & ~FD_CLOEXEC) == 0 &&
        syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, CLOSE_RANGE_CLOEXEC) == 0)
      return std::nullopt;
    return StepFailed(LaunchStep::kCloseFds, errno, "keep the broker fd %d", keep);
  }
  if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return std::nullopt;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return StepFailed(LaunchStep::kCloseFds, errno, "close_range unsupported and /proc/self/fd unreadable");
  const int self = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    const int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == self) continue;
    const int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
      closedir(dir);
      return StepFailed(LaunchStep::kCloseFds, errno, "fd %d", fd);
    }
  }
  closedir(dir);
  return std::nullopt;
}

std::optional<StepFailure> SetNoNewPrivs() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return StepFailed(LaunchStep::kNoNewPrivs, errno, "prctl");
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return StepFailed(LaunchStep::kNoNewPrivs, 0, "not set after prctl");
  return std::nullopt;
}

std::optional<StepFailure> DisableCoreDumps() {
  const rlimit none{0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) return StepFailed(LaunchStep::kCoreDumps, errno, "setrlimit(RLIMIT_CORE, 0)");
  rlimit now{};
  if (getrlimit(RLIMIT_CORE, &now) != 0 || now.rlim_cur != 0 || now.rlim_max != 0)
    return StepFailed(LaunchStep::kCoreDumps, 0, "RLIMIT_CORE is not 0 after setrlimit");
  return std::nullopt;
}

std::optional<StepFailure> DropCapabilities() {
  constexpr LaunchStep kStep = LaunchStep::kDropCapabilities;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return StepFailed(kStep, errno, "capget");
  // The bounding set can only be dropped with CAP_SETPCAP. Without it the
  // process holds no capability to lose, and no_new_privs (already set)
  // stops exec from granting any: the bounding set is then moot.
  const bool has_setpcap = data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP);
  if (has_setpcap) {
    // Every capability this kernel knows: dropping one past the last answers
    // EINVAL (dropping one already out of the set succeeds).
    for (int cap = 0;; ++cap) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
      if (errno == EINVAL && cap > CAP_SETPCAP) break;
      return StepFailed(kStep, errno, "bounding set, capability %d", cap);
    }
    // Root keeps no special status across exec either.
    if (prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                  SECBIT_KEEP_CAPS_LOCKED,
              0, 0, 0) != 0)
      return StepFailed(kStep, errno, "securebits");
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return StepFailed(kStep, errno, "ambient set");
  __user_cap_data_struct none[2]{};
  if (syscall(SYS_capset, &header, none) != 0) return StepFailed(kStep, errno, "capset");
  if (syscall(SYS_capget, &header, data) != 0) return StepFailed(kStep, errno, "capget");
  for (const auto& d : data)
    if (d.effective || d.permitted || d.inheritable) return StepFailed(kStep, 0, "capabilities remain after capset");
  return std::nullopt;
}

std::optional<StepFailure> ApplyLandlock(const LandlockPlan& ll) {
  constexpr LaunchStep kStep = LaunchStep::kLandlock;
  if (ll.abi == LandlockAbi::kNone) return StepFailed(kStep, 0, "no Landlock ABI in the plan");
  RulesetAttr attr{ll.handled_fs, ll.handled_net, ll.scoped};
  // Owned: closed however the step ends (each rule's fd before it).
  const UniqueFd ruleset(static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, RulesetAttrSize(ll.abi), 0)));
  if (!ruleset.valid()) return StepFailed(kStep, errno, "create_ruleset (ABI %d)", static_cast<int>(ll.abi));
  auto fail = [](int err, const char* what, const char* path) { return StepFailed(kStep, err, "%s %s", what, path); };
  for (const auto& rule : ll.paths) {
    const UniqueFd fd(rule.canonical ? OpenNoSymlinks(rule.path) : open(rule.path.c_str(), O_PATH | O_CLOEXEC));
    if (!fd.valid()) {
      if (rule.optional && errno == ENOENT) continue;
      if (rule.canonical && errno == ELOOP)
        return fail(ELOOP, rule.source.c_str(), (rule.path + ": " + kSwappedForSymlink).c_str());
      return fail(errno, rule.source.c_str(), rule.path.c_str());
    }
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) return fail(errno, rule.source.c_str(), rule.path.c_str());
    if (!IsInode(st, rule.inode)) return fail(0, rule.source.c_str(), (rule.path + ": " + kNotTheInode).c_str());
    landlock_path_beneath_attr beneath{};
    beneath.allowed_access = S_ISDIR(st.st_mode) ? rule.access : (rule.access & kFsFileRights);
    beneath.parent_fd = fd.get();
    const long rc = beneath.allowed_access == 0
                        ? 0
                        : syscall(SYS_landlock_add_rule, ruleset.get(), kLandlockRulePathBeneath, &beneath, 0);
    const int err = errno;
    if (rc != 0) return fail(err, rule.source.c_str(), rule.path.c_str());
  }
  for (const auto& rule : ll.ports) {
    NetPortAttr port{rule.access, rule.port};
    if (syscall(SYS_landlock_add_rule, ruleset.get(), kLandlockRuleNetPort, &port, 0) != 0)
      return fail(errno, rule.source.c_str(), std::to_string(rule.port).c_str());
  }
  if (syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) return fail(errno, "restrict_self", "");
  return std::nullopt;
}

}  // namespace

std::optional<StepFailure> ApplySeccomp(const std::vector<SeccompRule>& rules, int highest) {
  constexpr LaunchStep kStep = LaunchStep::kSeccomp;
  const SeccompArch arch = NativeSeccompArch();
  // The build compiled every row set the table can select, with its table
  // program (foreign and x32 calls killed, ENOSYS above the syscall table,
  // the rows newer than libseccomp: seccomp/filter.h); rows or a table end
  // it did not (a test build's altered plan) are compiled here, by the same
  // code.
  const PrecompiledFilters built = FindPrecompiled(rules, arch);
  TableProgram made;
  std::span<const sock_filter> table = built.table;
  if (table.empty() || built.highest != highest) {
    auto result = MakeTableProgram(rules, arch, highest);
    if (!result.ok()) return StepFailed(kStep, 0, "%s: %s", result.error().where.c_str(), result.error().what.c_str());
    made = result.value();
    table = made.span();
  }
  std::span<const sock_filter> program = built.rows;
  std::vector<sock_filter> compiled;
  if (program.empty()) {
    auto result = CompileSeccomp(rules, arch);
    if (!result.ok()) return StepFailed(kStep, 0, "%s: %s", result.error().where.c_str(), result.error().what.c_str());
    compiled = std::move(result).value();
    program = compiled;
  }
  // One filter: the table program runs first and falls through to the rows
  // (ChainSeccomp). A test build can leave the table program out.
  std::vector<sock_filter> chained;
  if (FaultSkipStep("seccomp-above-table")) {
    chained.assign(program.begin(), program.end());
  } else {
    auto result = ChainSeccomp(table, program);
    if (!result.ok()) return StepFailed(kStep, 0, "%s: %s", result.error().where.c_str(), result.error().what.c_str());
    chained = std::move(result).value();
  }
  if (chained.size() > BPF_MAXINSNS) return StepFailed(kStep, 0, "the filter has %zu instructions", chained.size());
  sock_fprog prog{static_cast<unsigned short>(chained.size()), chained.data()};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return StepFailed(kStep, errno, "load");
  return std::nullopt;
}

namespace {

std::optional<StepFailure> WaitAtGate(int gate_fd) {
  constexpr LaunchStep kStep = LaunchStep::kGate;
  if (send(gate_fd, &kGateReady, 1, MSG_NOSIGNAL) != 1) return StepFailed(kStep, errno, "gate fd %d: send", gate_fd);
  char answer = 0;
  ssize_t n;
  do n = read(gate_fd, &answer, 1);
  while (n < 0 && errno == EINTR);
  if (n < 0) return StepFailed(kStep, errno, "gate fd %d: read", gate_fd);
  if (n == 0 || answer != kGateGo) return StepFailed(kStep, 0, "the supervisor did not release the gate");
  return std::nullopt;
}

// Applies one step of the launch (unless a test build leaves it out).
template <typename ApplyFn>
std::optional<StepFailure> Apply(LaunchStep step, ApplyFn apply) {
  if (FaultSkipStep(StepName(step))) return std::nullopt;  // test builds only (fault_hooks.h)
  return apply();
}

}  // namespace

std::optional<StepFailure> StepFailed(LaunchStep step, int err, const char* fmt, ...) {
  StepFailure f;
  f.step = step;
  f.err = err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f.detail, sizeof f.detail, fmt, ap);
  va_end(ap);
  return f;
}

const char* StepName(LaunchStep step) {
  switch (step) {
    case LaunchStep::kPlacement: return "placement";
    case LaunchStep::kCloseFds: return "close-fds";
    case LaunchStep::kNoNewPrivs: return "no-new-privs";
    case LaunchStep::kCoreDumps: return "no-core-dumps";
    case LaunchStep::kMountNamespace: return "mount-namespace";
    case LaunchStep::kTerminal: return "terminal";
    case LaunchStep::kDropCapabilities: return "drop-capabilities";
    case LaunchStep::kLandlock: return "landlock";
    case LaunchStep::kSeccomp: return "seccomp";
    case LaunchStep::kGate: return "gate";
    case LaunchStep::kExec: return "exec";
  }
  return "?";
}

std::string StepFailureLine(const StepFailure& failure) {
  std::string line = std::string("sandbox: ") + StepName(failure.step) + ": " + failure.detail;
  if (failure.err != 0) line += std::string(": ") + strerror(failure.err);
  return line;
}

std::optional<StepFailure> ConfineSelf(const Plan& plan, const LaunchOptions& options) {
  if (plan.placement.verdict != Verdict::kOk)
    return StepFailed(LaunchStep::kPlacement, 0, "%s", VerdictName(plan.placement.verdict));
  if ((plan.broker == BrokerHandoff::kInheritedFd) != (options.broker_fd > 2))
    return StepFailed(LaunchStep::kCloseFds, 0, "the plan hands over a broker connection exactly when one is given");
  if (auto f = Apply(LaunchStep::kCloseFds, [&] { return CloseInheritedFds(options.broker_fd); })) return f;
  if (auto f = Apply(LaunchStep::kNoNewPrivs, SetNoNewPrivs)) return f;
  if (auto f = Apply(LaunchStep::kCoreDumps, DisableCoreDumps)) return f;
  GrantWitnesses witnesses;
  if (auto f = Apply(LaunchStep::kMountNamespace, [&] { return EnterMountNamespace(plan, options, witnesses); }))
    return f;
  if (options.terminal)
    if (const char* what = ""; int err = OpenJobTerminal(options.gate_fd, &what))
      return StepFailed(LaunchStep::kTerminal, err, "%s", what);
  if (auto f = Apply(LaunchStep::kDropCapabilities, DropCapabilities)) return f;
  if (auto f = Apply(LaunchStep::kLandlock, [&] { return ApplyLandlock(plan.landlock); })) return f;
  if (plan.seccomp_arch != NativeSeccompArch())
    return StepFailed(LaunchStep::kSeccomp, 0, "the plan's filter is for %s, this launcher runs %s",
                      SeccompArchName(plan.seccomp_arch), SeccompArchName(NativeSeccompArch()));
  if (auto f = Apply(LaunchStep::kSeccomp, [&] { return ApplySeccomp(plan.seccomp, plan.seccomp_highest); })) return f;
  // Each writable grant is still the directory at its path: before the
  // gate (a refusal), and again after it, just before the exec (the
  // supervisor reads a failure there as a refusal too: nothing ran).
  FaultPause("launcher-before-gate");
  if (auto f = CheckGrantsInPlace(witnesses)) return f;
  if (options.gate_fd >= 0) {
    if (auto f = Apply(LaunchStep::kGate, [&] { return WaitAtGate(options.gate_fd); })) return f;
    FaultPause("launcher-after-gate");
    if (auto f = CheckGrantsInPlace(witnesses)) return f;
  }
  return std::nullopt;
}

void ExecModule(char* const argv[]) { execvp(argv[0], argv); }

}  // namespace oarbank
