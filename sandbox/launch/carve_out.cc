#include "sandbox/launch/carve_out.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
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
#include "sandbox/common/path_within.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

int OpenNoSymlinks(int dirfd, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
}

// ---- Resolution (the caller's side) ----

Error Bad(const std::string& where, const std::string& what) { return Error{where, what}; }

constexpr char kPlanted[] = "a symbolic link is on the way (refused: whoever could write there could have planted it)";

// "/a/./b/../c" -> "/a/c". Equal to the real path when no component is a
// symbolic link, which the open with RESOLVE_NO_SYMLINKS then proves.
std::string Normalize(const std::string& absolute) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= absolute.size()) {
    size_t slash = absolute.find('/', i);
    if (slash == std::string::npos) slash = absolute.size();
    const std::string part = absolute.substr(i, slash - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = slash + 1;
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

Expected<UniqueFd> OpenDirectory(const std::string& path, const std::string& where) {
  UniqueFd fd(OpenNoSymlinks(AT_FDCWD, path, O_PATH | O_DIRECTORY));
  if (fd.valid()) return fd;
  const int err = errno;
  if (err == ELOOP) return Bad(where, path + ": " + kPlanted);
  if (err == ENOTDIR) return Bad(where, path + ": not a directory");
  return Bad(where, path + ": " + strerror(err));
}

// A small regular file `name` in `dir`, never through a link; nothing when
// it does not exist.
Expected<std::optional<std::string>> ReadSmallFile(int dir, const char* name, const std::string& shown) {
  UniqueFd fd(openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return std::optional<std::string>();
    if (err == ELOOP) return Bad(shown, std::string("a symbolic link: ") + kPlanted);
    return Bad(shown, strerror(err));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Bad(shown, strerror(errno));
  if (!S_ISREG(st.st_mode)) return Bad(shown, "not a regular file");
  std::string text(kGitPointerMaxBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Bad(shown, strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kGitPointerMaxBytes) return Bad(shown, "larger than " + std::to_string(kGitPointerMaxBytes) + " bytes");
  text.resize(got);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty() || text.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    return Bad(shown, "expected one line naming a path");
  return std::optional<std::string>(text);
}

std::string Absolute(const std::string& path, const std::string& base) {
  return Normalize(path[0] == '/' ? path : base + "/" + path);
}

}  // namespace

std::vector<std::string> GitCarveOuts::Paths() const {
  std::vector<std::string> out{dot_git};
  if (git_dir != dot_git) out.push_back(git_dir);
  if (common_dir != dot_git && common_dir != git_dir) out.push_back(common_dir);
  return out;
}

Expected<std::optional<GitCarveOuts>> ResolveGitCarveOuts(const std::string& worktree) {
  auto wt = OpenDirectory(worktree, "worktree");
  if (!wt.ok()) return wt.error();
  GitCarveOuts out;
  out.dot_git = (worktree == "/" ? "" : worktree) + "/.git";
  struct stat st {};
  if (fstatat(wt.value().get(), ".git", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<GitCarveOuts>();
    return Bad(out.dot_git, strerror(errno));
  }
  UniqueFd git_dir;
  if (S_ISLNK(st.st_mode)) return Bad(out.dot_git, std::string("a symbolic link: ") + kPlanted);
  if (S_ISDIR(st.st_mode)) {
    out.git_dir = out.dot_git;
    git_dir.Reset(openat(wt.value().get(), ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!git_dir.valid()) return Bad(out.dot_git, errno == ENOTDIR ? kPlanted : strerror(errno));
  } else if (S_ISREG(st.st_mode)) {
    out.pointer = true;
    auto text = ReadSmallFile(wt.value().get(), ".git", out.dot_git);
    if (!text.ok()) return text.error();
    constexpr std::string_view kPrefix = "gitdir: ";
    if (!text.value() || text.value()->compare(0, kPrefix.size(), kPrefix) != 0 ||
        text.value()->size() == kPrefix.size())
      return Bad(out.dot_git, "a file that does not say \"gitdir: PATH\"");
    out.git_dir = Absolute(text.value()->substr(kPrefix.size()), worktree);
    auto opened = OpenDirectory(out.git_dir, out.dot_git + " (gitdir)");
    if (!opened.ok()) return opened.error();
    git_dir = std::move(opened).value();
  } else {
    return Bad(out.dot_git, "neither a directory nor a regular file");
  }
  auto common = ReadSmallFile(git_dir.get(), "commondir", out.git_dir + "/commondir");
  if (!common.ok()) return common.error();
  out.common_dir = out.git_dir;
  if (common.value()) {
    out.common_dir = Absolute(*common.value(), out.git_dir);
    auto opened = OpenDirectory(out.common_dir, out.git_dir + "/commondir");
    if (!opened.ok()) return opened.error();
  }
  return std::optional<GitCarveOuts>(out);
}

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
std::optional<StepFailure> BindOntoItself(const std::string& path, bool read_only) {
  const char* what = read_only ? "read-only carve-out" : "pin the carve-out's ancestor";
  UniqueFd fd(OpenNoSymlinks(AT_FDCWD, path, O_PATH));
  if (!fd.valid()) return StepFailed(LaunchStep::kMountNamespace, errno, "%s %s", what, path.c_str());
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
  UniqueFd after(OpenNoSymlinks(AT_FDCWD, path, O_PATH));
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
      if (auto f = BindOntoItself(ancestor, false)) return f;
      pinned.push_back(ancestor);
    }
    if (auto f = BindOntoItself(path, true)) return f;
  }
  return std::nullopt;
}

}  // namespace oarbank
