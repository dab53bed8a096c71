#include "sandbox/launch/carve_out.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/path_within.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {

std::vector<std::string> AncestorsWithin(const std::string& grant, const std::string& path) {
  std::vector<std::string> out;
  if (!IsStrictlyBelow(path, grant)) return out;
  size_t at = grant == "/" ? 0 : grant.size();
  while (true) {
    const size_t slash = path.find('/', at + 1);
    if (slash == std::string::npos) break;
    out.push_back(path.substr(0, slash));
    at = slash;
  }
  return out;
}

// ---- The binds (the launcher's side) ----

namespace {

// Binds `path` onto itself (a copy of its mounts, read-only when asked),
// reached with no symbolic link, and checks that the path now leads to the
// same inode on the new mount.
std::optional<StepFailure> BindOntoItself(const std::string& path, bool read_only, FileId expected) {
  const char* what = read_only ? "read-only carve-out" : "pin the carve-out's ancestor";
  UniqueFd fd(OpenNoSymlinksAt(AT_FDCWD, path.c_str(), O_PATH));
  if (!fd.valid()) return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s", what, path.c_str());
  if (!IsInode(fd.get(), expected))
    return StepFailed(LaunchStep::kMountNamespace, 0, "%s %s: %s", what, path.c_str(), kNotTheInode);
  struct stat before {};
  if (fstat(fd.get(), &before) != 0)
    return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s: fstat", what, path.c_str());
  UniqueFd tree(static_cast<int>(
      syscall(SYS_open_tree, fd.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE)));
  if (!tree.valid()) return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s: copy its mount", what, path.c_str());
  if (read_only) {
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s: make it read-only", what, path.c_str());
  }
  if (syscall(SYS_move_mount, tree.get(), "", fd.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s: bind", what, path.c_str());
  UniqueFd after(OpenNoSymlinksAt(AT_FDCWD, path.c_str(), O_PATH));
  struct stat st {};
  struct statfs fs {};
  if (!after.valid() || fstat(after.get(), &st) != 0 || fstatfs(after.get(), &fs) != 0)
    return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s: check the bind", what, path.c_str());
  if (st.st_dev != before.st_dev || st.st_ino != before.st_ino)
    return StepFailed(LaunchStep::kMountNamespace, 0, "%s %s: no longer the inode it bound", what, path.c_str());
  if (read_only && !(fs.f_flags & ST_RDONLY))
    return StepFailed(LaunchStep::kMountNamespace, 0, "%s %s: not read-only after its bind", what, path.c_str());
  return std::nullopt;
}

}  // namespace

std::optional<StepFailure> BindReadOnlyCarveOuts(const Plan& plan) {
  // Test builds only (common/fault_hooks.h): leaves the binds out, so a
  // test can show that the supervisor's gate refuses the launch.
  if (FaultSkipStep("read-only-carve-outs")) return std::nullopt;
  std::vector<std::string> pinned;
  for (const auto& path : plan.read_only_binds) {
    const std::string* grant = nullptr;  // the innermost writable grant around it
    for (const auto& w : plan.writable_binds)
      if (IsStrictlyBelow(path, w) && (grant == nullptr || w.size() > grant->size())) grant = &w;
    if (grant == nullptr)
      return StepFailed(LaunchStep::kMountNamespace, 0, "read-only carve-out %s: inside no writable grant",
                        path.c_str());
    for (const auto& ancestor : AncestorsWithin(*grant, path)) {
      if (std::find(pinned.begin(), pinned.end(), ancestor) != pinned.end()) continue;
      if (auto f = BindOntoItself(ancestor, false, FileId{})) return f;
      pinned.push_back(ancestor);
    }
    const auto inode = plan.inodes.find(path);
    if (auto f = BindOntoItself(path, true, inode == plan.inodes.end() ? FileId{} : inode->second)) return f;
  }
  return std::nullopt;
}

}  // namespace oarbank
