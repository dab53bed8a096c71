#include "sandbox/launch/mount_namespace.h"

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/write_file.h"
#include "sandbox/host/root_etc.h"
#include "sandbox/launch/carve_out.h"
#include "sandbox/launch/job_devices.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sched.h>
#include <cstdarg>
#include <cstdio>

// mount(2) alone: <sys/mount.h> clashes with <linux/mount.h>, which the
// new mount API (open_tree, move_mount, mount_setattr) needs.
extern "C" int mount(const char* source, const char* target, const char* fstype, unsigned long flags, const void* data);

namespace oarbank {
namespace {

constexpr LaunchStep kStep = LaunchStep::kMountNamespace;

constexpr char kReplaced[] = "no longer the directory the launch bound (deleted, renamed or replaced since)";

// Root reads /etc as any user would (root_etc.h). A process that is not
// root (a test or a job switched to another uid after the plan was made)
// owns none of /etc's root-only files and needs no view.
struct RootEtc {
  bool view = false;
  int tree = -1;  // the caller's tree (LaunchOptions::root_etc_tree_fd), or made's
  UniqueFd made;  // the tree made here when the caller brought none
};

std::optional<StepFailure> PrepareRootEtc(const Plan& plan, const LaunchOptions& options, RootEtc& etc) {
  etc.view = plan.root_etc_view && geteuid() == 0;
  etc.tree = options.root_etc_tree_fd;
  if (etc.view && etc.tree < 0) {
    if (options.root_etc_idmap_fd < 0) return StepFailed(kStep, EBADF, "idmap a copy of /etc for root: no view given");
    const int tree = MakeRootEtcTree(options.root_etc_idmap_fd);
    if (tree < 0) return StepFailed(kStep, -tree, "idmap a copy of /etc for root");
    etc.made.Reset(tree);
    etc.tree = tree;
  }
  return std::nullopt;
}

// Where the launch stands before the namespaces change it: the ids the new
// user namespace maps to themselves, and the working directory.
struct Origin {
  uid_t uid = 0;
  gid_t gid = 0;
  char cwd[4096];
};

std::optional<StepFailure> NoteOrigin(Origin& origin) {
  origin.uid = getuid();
  origin.gid = getgid();
  if (getcwd(origin.cwd, sizeof origin.cwd) == nullptr) return StepFailed(kStep, errno, "getcwd");
  return std::nullopt;
}

std::optional<StepFailure> UnshareUserAndMountNamespaces(const Origin& origin) {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return StepFailed(kStep, errno, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
  char map[64];
  if (int err = WriteWholeFile("/proc/self/setgroups", "deny")) return StepFailed(kStep, err, "/proc/self/setgroups");
  snprintf(map, sizeof map, "%u %u 1\n", origin.uid, origin.uid);
  if (int err = WriteWholeFile("/proc/self/uid_map", map)) return StepFailed(kStep, err, "/proc/self/uid_map");
  snprintf(map, sizeof map, "%u %u 1\n", origin.gid, origin.gid);
  if (int err = WriteWholeFile("/proc/self/gid_map", map)) return StepFailed(kStep, err, "/proc/self/gid_map");
  return std::nullopt;
}

// Nothing done here may propagate back to the host's mounts.
std::optional<StepFailure> MakeMountsPrivate() {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return StepFailed(kStep, errno, "make / private");
  return std::nullopt;
}

// The inode the agent's walk found at a policy path (plan.inodes), if any.
FileId InodeOf(const Plan& plan, const std::string& path) {
  const auto it = plan.inodes.find(path);
  return it == plan.inodes.end() ? FileId{} : it->second;
}

// Notes what the grant at `path` is (GrantWitness), from the fstat of the
// descriptor it was opened as.
std::optional<StepFailure> WitnessGrant(const std::string& path, const struct stat& st, GrantWitness& witness) {
  const size_t slash = path.rfind('/');
  witness.path = path;
  witness.name = slash == std::string::npos || slash + 1 == path.size() ? "." : path.substr(slash + 1);
  witness.parent.Reset(OpenNoSymlinks(slash == 0 ? std::string("/") : path.substr(0, slash)));
  if (!witness.parent.valid()) return StepFailed(kStep, errno, "open the directory of %s", path.c_str());
  witness.dev = st.st_dev;
  witness.ino = st.st_ino;
  return std::nullopt;
}

// Each writable grant's bind: a copy of the mounts at the grant, reached
// with no symlink, made before everything turns read-only (so it stays as
// writable as the host's mount is), then nosuid, nodev, and noexec unless
// exec_writable.
std::optional<StepFailure> CopyWritableGrants(const Plan& plan, GrantWitnesses& witnesses,
                                              std::vector<UniqueFd>& trees) {
  trees.reserve(plan.writable_binds.size());
  for (const auto& path : plan.writable_binds) {
    // Declared before the grant, so a failure closes the grant, then the
    // directory it is named in.
    GrantWitness witness;
    UniqueFd grant(OpenNoSymlinks(path));
    if (!grant.valid()) {
      const int err = errno;
      if (err == ELOOP) return StepFailed(kStep, err, "%s: %s", path.c_str(), kSwappedForSymlink);
      return StepFailed(kStep, err, "open %s", path.c_str());
    }
    struct stat st {};
    if (fstat(grant.get(), &st) != 0) return StepFailed(kStep, errno, "stat %s", path.c_str());
    if (!IsInode(st, InodeOf(plan, path))) return StepFailed(kStep, 0, "%s: %s", path.c_str(), kNotTheInode);
    if (auto f = WitnessGrant(path, st, witness)) return f;
    witnesses.grants.push_back(std::move(witness));
    FaultPause("launcher-grant-opened");
    UniqueFd tree(static_cast<int>(
        syscall(SYS_open_tree, grant.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE)));
    const int err = errno;
    grant.Reset();  // closed before the copy's attributes are set
    if (!tree.valid()) return StepFailed(kStep, err, "copy the mount of %s", path.c_str());
    trees.push_back(std::move(tree));
    mount_attr attr{};
    // test-only build (common/fault_hooks.h): the mutation points that drop one.
    attr.attr_set = (FaultSkipStep("grant-nosuid") ? 0 : MOUNT_ATTR_NOSUID) |
                    (FaultSkipStep("grant-nodev") ? 0 : MOUNT_ATTR_NODEV) |
                    (plan.writable_noexec ? MOUNT_ATTR_NOEXEC : 0);
    if (syscall(SYS_mount_setattr, trees.back().get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      return StepFailed(kStep, errno, "%s %s", plan.writable_noexec ? "noexec" : "nosuid", path.c_str());
  }
  return std::nullopt;
}

// Landlock has no hook on chmod, chown, utimensat or setxattr, which need
// no open: outside the writable grants a read-only mount refuses them
// (EROFS). Every mount, /dev included: writing to a device node does not
// need a writable mount.
std::optional<StepFailure> MakeEveryMountReadOnly(const Plan& plan) {
  mount_attr read_only{};
  read_only.attr_set = MOUNT_ATTR_RDONLY;
  if (plan.read_only_mounts &&
      syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof read_only) != 0) {
    return StepFailed(kStep, errno, "make every mount read-only");
  }
  return std::nullopt;
}

// Attached in the policy's order, parents first: each grant is opened
// again, through the binds attached before it.
std::optional<StepFailure> BindWritableGrants(const Plan& plan, const GrantWitnesses& witnesses,
                                              const std::vector<UniqueFd>& trees) {
  for (size_t i = 0; i < trees.size(); ++i) {
    const std::string& path = plan.writable_binds[i];
    const UniqueFd fd(OpenNoSymlinks(path));
    // The bind goes where the copied directory still is, or nowhere.
    struct stat st {};
    const bool same = fd.valid() && fstat(fd.get(), &st) == 0 && st.st_dev == witnesses.grants[i].dev &&
                      st.st_ino == witnesses.grants[i].ino;
    const int err = !fd.valid() ? errno
                    : !same     ? 0
                    : syscall(SYS_move_mount, trees[i].get(), "", fd.get(), "",
                              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0
                        ? errno
                        : 0;
    if (err == ELOOP) return StepFailed(kStep, err, "%s: %s", path.c_str(), kSwappedForSymlink);
    if (err != 0) return StepFailed(kStep, err, "bind %s", path.c_str());
    if (!same) return StepFailed(kStep, 0, "%s: %s", path.c_str(), kReplaced);
  }
  return std::nullopt;
}

// What the module will reach by name: / read-only, and each grant, with no
// symlink, on its bind, noexec unless exec_writable.
std::optional<StepFailure> CheckWhatTheModuleReaches(const Plan& plan) {
  if (plan.read_only_mounts) {
    struct statfs root {};
    if (statfs("/", &root) != 0) return StepFailed(kStep, errno, "statfs /");
    if (!(root.f_flags & ST_RDONLY)) return StepFailed(kStep, 0, "/ is not read-only after the remount");
  }
  for (const auto& path : plan.writable_binds) {
    const UniqueFd fd(OpenNoSymlinks(path));
    struct statfs fs {};
    const int err = !fd.valid() ? errno : fstatfs(fd.get(), &fs) != 0 ? errno : 0;
    if (err == ELOOP) return StepFailed(kStep, err, "%s: %s", path.c_str(), kSwappedForSymlink);
    if (err != 0) return StepFailed(kStep, err, "check the bind of %s", path.c_str());
    if (plan.writable_noexec && !(fs.f_flags & ST_NOEXEC))
      return StepFailed(kStep, 0, "%s is not on a noexec mount after its bind", path.c_str());
  }
  return std::nullopt;
}

// A supervised job's own devpts and /dev/shm, writable above the read-only /dev.
std::optional<StepFailure> MountOwnDevices(const Plan& plan) {
  if (const char* what = ""; int err = MountJobDevices(plan.job_devices, &what))
    return StepFailed(kStep, err, "%s", what);
  return std::nullopt;
}

std::optional<StepFailure> AttachRootEtc(RootEtc& etc) {
  if (!etc.view) return std::nullopt;
  const int err = AttachRootEtcTree(etc.tree);
  etc.made.Reset();  // a tree made here, closed once attached (or not)
  if (err != 0) return StepFailed(kStep, err, "mount the idmapped /etc");
  return std::nullopt;
}

// The working directory still points into the mount below the binds:
// resolve it again so "./written-file" meets the noexec mount.
std::optional<StepFailure> ReturnToWorkingDirectory(const Origin& origin) {
  if (chdir(origin.cwd) != 0) return StepFailed(kStep, errno, "chdir %s", origin.cwd);
  return std::nullopt;
}

}  // namespace

std::optional<StepFailure> CheckGrantsInPlace(const GrantWitnesses& witnesses) {
  for (const auto& g : witnesses.grants) {
    struct stat st {};
    if (fstatat(g.parent.get(), g.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      const int err = errno;
      return StepFailed(LaunchStep::kMountNamespace, err, "%s: %s", g.path.c_str(), kReplaced);
    }
    if (st.st_dev != g.dev || st.st_ino != g.ino)
      return StepFailed(LaunchStep::kMountNamespace, 0, "%s: %s", g.path.c_str(), kReplaced);
  }
  return std::nullopt;
}

std::optional<StepFailure> EnterMountNamespace(const Plan& plan, const LaunchOptions& options,
                                               GrantWitnesses& witnesses) {
  // Each fd made here is owned (UniqueFd) and closed however the step ends;
  // the copies of the writable grants, attached or not, when it returns.
  RootEtc etc;
  if (auto f = PrepareRootEtc(plan, options, etc)) return f;
  Origin origin;
  if (auto f = NoteOrigin(origin)) return f;
  if (!options.own_mount_namespace)
    if (auto f = UnshareUserAndMountNamespaces(origin)) return f;
  if (auto f = MakeMountsPrivate()) return f;
  std::vector<UniqueFd> trees;
  if (auto f = CopyWritableGrants(plan, witnesses, trees)) return f;
  if (auto f = MakeEveryMountReadOnly(plan)) return f;
  if (auto f = BindWritableGrants(plan, witnesses, trees)) return f;
  FaultPause("launcher-grants-bound");
  if (auto f = CheckGrantsInPlace(witnesses)) return f;
  if (auto f = BindReadOnlyCarveOuts(plan)) return f;  // the policy's read_only parts of the grants
  if (auto f = CheckWhatTheModuleReaches(plan)) return f;
  if (auto f = MountOwnDevices(plan)) return f;
  if (auto f = AttachRootEtc(etc)) return f;
  if (auto f = ReturnToWorkingDirectory(origin)) return f;
  return std::nullopt;
}

}  // namespace oarbank
