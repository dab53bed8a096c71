#include "sandbox/host/host_facts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string_view>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/read_file.h"
#include "sandbox/host/landlock_abi.h"
#include "sandbox/host/whiteout_trial.h"
#include "sandbox/policy/base_system.h"

namespace oarbank {
namespace {

// /proc and /sys knobs are one short line, /proc/self/cgroup a few lines;
// mountinfo is about 150 bytes a mount, and a container host may have tens
// of thousands. Plain reads (read_file.h): no iostreams on the launch path.
constexpr size_t kMaxProcFileBytes = 1 << 20;
constexpr size_t kMaxMountinfoBytes = 256 << 20;

std::string ReadFirstLine(const std::string& path) {
  std::string text = ReadFileUpTo(path, kMaxProcFileBytes).value_or("");
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return out;
}

std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i == s.size()) return out;
    size_t j = i;
    while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) ++j;
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
}

// The Landlock features a plan relies on, each with the ABI that brings it
// and a ruleset that handles it, in ABI order.
struct LandlockFeature {
  const char* name;
  int abi;
  uint64_t fs, net, scoped;
};
constexpr LandlockFeature kLandlockFeatures[] = {
    {"filesystem", 1, kFsReadFile | kFsWriteFile | kFsMakeReg, 0, 0},
    {"refer", 2, kFsRefer, 0, 0},
    {"truncate", 3, kFsTruncate, 0, 0},
    {"tcp", 4, 0, kNetBindTcp | kNetConnectTcp, 0},
    {"ioctl_dev", 5, kFsIoctlDev, 0, 0},
    {"scope_abstract_unix", 6, 0, 0, kScopeAbstractUnixSocket},
    {"scope_signal", 6, 0, 0, kScopeSignal},
    {"resolve_unix", 9, kFsResolveUnix, 0, 0},
    {"udp", 10, 0, kNetBindUdp | kNetConnectSendUdp, 0},
};

// A ruleset handling the feature can be made (an unknown right is EINVAL).
bool HasLandlockFeature(const LandlockFeature& feature) {
  if (fault_hooks.landlock_missing != nullptr && std::string_view(fault_hooks.landlock_missing) == feature.name)
    return false;
  const uint64_t attr[3] = {feature.fs, feature.net, feature.scoped};
  const size_t size = feature.scoped != 0 ? sizeof attr : feature.net != 0 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  const long fd = syscall(SYS_landlock_create_ruleset, attr, size, 0);
  if (fd < 0) return false;
  close(static_cast<int>(fd));
  return true;
}

// One ruleset that handles every feature up to the ABI answers for all of
// them at once (the kernel refuses the whole ruleset for one right it does
// not know); only when it is refused is each feature asked alone, to name
// the first one missing.
bool HasLandlockFeaturesUpTo(int abi) {
  if (fault_hooks.landlock_missing != nullptr) return false;
  LandlockFeature all{"all", abi, 0, 0, 0};
  for (const LandlockFeature& feature : kLandlockFeatures) {
    if (feature.abi > abi) break;
    all.fs |= feature.fs;
    all.net |= feature.net;
    all.scoped |= feature.scoped;
  }
  return HasLandlockFeature(all);
}

void ProbeLandlockFeatures(HostFacts& f) {
  if (f.landlock_abi <= 0 || HasLandlockFeaturesUpTo(f.landlock_abi)) return;
  for (const LandlockFeature& feature : kLandlockFeatures) {
    if (feature.abi > f.landlock_abi) return;
    if (HasLandlockFeature(feature)) continue;
    f.landlock_missing = std::string(feature.name) + " (ABI " + std::to_string(feature.abi) + ")";
    f.landlock_abi = feature.abi - 1;
    return;
  }
}

void ProbeLandlock(HostFacts& f, int abi_cap) {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  f.landlock_kernel_abi = abi > 0 ? static_cast<int>(abi) : 0;
  f.landlock_abi = f.landlock_kernel_abi;
  if (abi_cap >= 0 && abi_cap < f.landlock_abi) {
    f.landlock_abi = abi_cap;
    f.landlock_capped = true;
  }
  if (f.landlock_kernel_abi > 0) {
    const long errata = syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetErrata);
    f.landlock_errata_known = errata >= 0;
    f.landlock_errata = errata > 0 ? static_cast<uint32_t>(errata) : 0;
  }
  ProbeLandlockFeatures(f);
}

void ProbeSeccomp(HostFacts& f) {
  // actions_avail exists only with CONFIG_SECCOMP_FILTER.
  f.seccomp_actions = Words(ReadFirstLine("/proc/sys/kernel/seccomp/actions_avail"));
  auto has = [&](const char* a) {
    return std::find(f.seccomp_actions.begin(), f.seccomp_actions.end(), a) != f.seccomp_actions.end();
  };
  f.seccomp_filter = has("errno") && has("kill_process") && has("allow");
}

void ProbeUserNamespaces(HostFacts& f) {
  // Debian's knob, the upstream limit, and Ubuntu's AppArmor restriction.
  const std::string debian = ReadFirstLine("/proc/sys/kernel/unprivileged_userns_clone");
  const std::string max = ReadFirstLine("/proc/sys/user/max_user_namespaces");
  const std::string apparmor = ReadFirstLine("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  struct statfs proc {};
  if (statfs("/proc", &proc) != 0 || proc.f_type != PROC_SUPER_MAGIC) {
    // Hidden or replaced: nothing below it says what the kernel offers.
    f.user_namespaces_detail = "/proc is not the kernel's proc filesystem: what it offers cannot be read";
  } else if (access("/proc/self/ns/user", F_OK) != 0) {
    f.user_namespaces_detail = "kernel built without user namespaces";
  } else if (!max.empty() && max == "0") {
    f.user_namespaces_detail = "user.max_user_namespaces is 0";
  } else if (geteuid() != 0 && debian == "0") {
    f.user_namespaces_detail = "kernel.unprivileged_userns_clone is 0";
  } else if (geteuid() != 0 && apparmor == "1") {
    f.user_namespaces_detail = "kernel.apparmor_restrict_unprivileged_userns is 1";
  } else {
    f.user_namespaces = true;
    f.user_namespaces_detail = "available";
  }
}

// Where the cgroup2 hierarchy is mounted. mountinfo names it wherever it
// is, but a read of it makes the kernel format every mount of the namespace
// (about 60 us here for 22, on every job's probe): the two places systemd
// mounts it, /sys/fs/cgroup (the unified layout) and /sys/fs/cgroup/unified
// (the hybrid one), are asked first with statfs(2), which sees the mount on
// top of each, and mountinfo is read only when neither is cgroup2.
void ProbeCgroup(HostFacts& f) {
  for (const char* point : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    struct statfs fs {};
    if (statfs(point, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
      return ReadCgroupFactsAt(f.cgroup, point, "/proc/self/cgroup");
  }
  ReadCgroupFacts(f.cgroup, "/proc/self/mountinfo", "/proc/self/cgroup");
}

void ProbeGpuNodes(HostFacts& f) {
  for (auto p : kGpuPaths)
    if (access(std::string(p).c_str(), F_OK) == 0) f.gpu_nodes.emplace_back(p);
  const std::string prefix(kGpuNodePrefix.substr(5));  // name part after "/dev/"
  if (DIR* dev = opendir("/dev")) {
    while (dirent* e = readdir(dev)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) f.gpu_nodes.push_back("/dev/" + std::string(e->d_name));
    }
    closedir(dev);
  }
  std::sort(f.gpu_nodes.begin(), f.gpu_nodes.end());
}

// Appends the world-readable parts of `path` to `out`; returns whether the
// whole subtree is world-readable (then only `path` itself is appended).
// Symlinks count by their target.
bool CollectWorldReadable(int parent_fd, const std::string& name, const std::string& path,
                          std::vector<std::string>& out) {
  struct stat st {};
  if (fstatat(parent_fd, name.c_str(), &st, 0) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    const bool readable = (st.st_mode & S_IROTH) != 0;
    if (readable) out.push_back(path);
    return readable;
  }
  if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH)) return false;
  const int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (dir == nullptr) {
    if (fd >= 0) close(fd);
    return false;
  }
  const size_t mark = out.size();
  bool all = true;
  while (dirent* e = readdir(dir)) {
    const std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    all &= CollectWorldReadable(dirfd(dir), child, path + "/" + child, out);
  }
  closedir(dir);
  if (all) {
    out.resize(mark);
    out.push_back(path);
  }
  return all;
}

// Fails closed: no fact, and why.
void FailCgroupFacts(CgroupFacts& c, std::string why) {
  c = CgroupFacts{};
  c.probed = true;
  c.error = std::move(why);
}

}  // namespace

void ReadCgroupFacts(CgroupFacts& c, const std::string& mountinfo_path, const std::string& self_cgroup_path) {
  c = CgroupFacts{};
  c.probed = true;
  auto fail = [&c](std::string why) { FailCgroupFacts(c, std::move(why)); };
  // The cgroup2 mount, from mountinfo: "... - cgroup2 none rw". Every line
  // has at least the five fields before the separator.
  const HostFile mountinfo = ReadHostFile(mountinfo_path, kMaxMountinfoBytes);
  if (mountinfo.status != HostFileStatus::kRead) return fail(mountinfo.why);
  size_t number = 0;
  for (std::string_view line : Lines(mountinfo.text)) {
    ++number;
    const auto dash = line.find(" - ");
    const auto fields = Words(line.substr(0, dash));
    if (dash == std::string_view::npos || fields.size() < 5 || Words(line.substr(dash + 3)).empty())
      return fail(mountinfo_path + ": line " + std::to_string(number) + " is not a mountinfo line");
    if (!c.v2_mounted && Words(line.substr(dash + 3))[0] == "cgroup2") {
      c.v2_mounted = true;
      c.mount_point = fields[4];
    }
  }
  if (!c.v2_mounted) return;
  const std::string mount_point = c.mount_point;
  ReadCgroupFactsAt(c, mount_point, self_cgroup_path);
}

void ReadCgroupFactsAt(CgroupFacts& c, const std::string& mount_point, const std::string& self_cgroup_path) {
  c = CgroupFacts{};
  c.probed = true;
  c.v2_mounted = true;
  c.mount_point = mount_point;
  auto fail = [&c](std::string why) { FailCgroupFacts(c, std::move(why)); };
  // "0::/path" is the v2 line; v1 lines are "N:controllers:/path".
  const HostFile self = ReadHostFile(self_cgroup_path, kMaxProcFileBytes);
  if (self.status != HostFileStatus::kRead) return fail(self.why);
  size_t number = 0;
  for (std::string_view line : Lines(self.text)) {
    ++number;
    const auto first = line.find(':');
    const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos || line.size() == second + 1 || line[second + 1] != '/')
      return fail(self_cgroup_path + ": line " + std::to_string(number) + " is not a cgroup line");
    if (line.starts_with("0::")) c.own_path = c.mount_point + std::string(line.substr(3));
  }
  if (c.own_path.empty()) return;
  while (c.own_path.size() > 1 && c.own_path.back() == '/') c.own_path.pop_back();
  const HostFile controllers = ReadHostFile(c.own_path + "/cgroup.controllers", kMaxProcFileBytes);
  if (controllers.status != HostFileStatus::kRead) return fail(controllers.why);
  c.controllers = Words(controllers.text);
  c.writable =
      access(c.own_path.c_str(), W_OK) == 0 && access((c.own_path + "/cgroup.subtree_control").c_str(), W_OK) == 0;
  c.has_kill = access((c.own_path + "/cgroup.kill").c_str(), F_OK) == 0 ||
               access((c.mount_point + "/cgroup.kill").c_str(), F_OK) == 0;
}

void ProbeRootEtc(HostFacts& f) {
  if (!f.runs_as_root || f.etc_view.idmap || !f.etc_world_readable.empty()) return;
  // The idmap namespace is reusable: a long-lived agent makes it once. The
  // proof tree mounts once: the first caller gets it, later ones make theirs.
  static RootEtcView view = OpenRootEtcView();
  static std::mutex handing_on;
  {
    std::lock_guard<std::mutex> lock(handing_on);
    f.etc_view = view;
    view.proof_tree.reset();
  }
  if (!f.etc_view.idmap) CollectWorldReadable(AT_FDCWD, "/etc", "/etc", f.etc_world_readable);
}

HostFacts ProbeHost(int abi_cap, ProbeScope scope) {
  HostFacts f;
  utsname u{};
  if (uname(&u) == 0) {
    f.kernel_release = u.release;
    f.arch = u.machine;
  }
  ProbeLandlock(f, abi_cap);
  ProbeSeccomp(f);
  ProbeUserNamespaces(f);
  if (scope.cgroup) ProbeCgroup(f);
  if (scope.gpu_nodes) ProbeGpuNodes(f);
  if (scope.landlock_whiteout) f.landlock_whiteout_needs = ProbeWhiteoutRight(f.landlock_kernel_abi);
  f.uid = geteuid();
  f.gid = getegid();
  f.runs_as_root = f.uid == 0;
  return f;
}

}  // namespace oarbank
