#include "sandbox/common/open_no_symlinks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "sandbox/common/fault_hooks.h"

namespace oarbank {
namespace {

int OpenAt2(int dirfd, const char* path, int flags, bool no_xdev, bool beneath) {
  if (FaultSkipStep("openat2")) {
    errno = ENOSYS;
    return -1;
  }
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.resolve =
      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (no_xdev ? RESOLVE_NO_XDEV : 0) | (beneath ? RESOLVE_BENEATH : 0);
  return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

// The mount id of `fd` (statx, Linux 5.8), or 0 where the kernel has none.
uint64_t MountId(int fd) {
  struct statx stx {};
  if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) != 0) return 0;
  return (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
}

// Closes both and returns -1 with errno `err`.
int Refuse(int a, int b, int err) {
  if (a >= 0) close(a);
  if (b >= 0) close(b);
  errno = err;
  return -1;
}

// Why the component opened as `fd` from `dir` may not be stepped into, or 0.
int WhyNot(int dir, int fd, bool last, int flags, bool no_xdev) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno;
  if (S_ISLNK(st.st_mode)) return ELOOP;
  if ((!last || (flags & O_DIRECTORY)) && !S_ISDIR(st.st_mode)) return ENOTDIR;
  if (no_xdev && MountId(dir) != MountId(fd)) return EXDEV;
  return 0;
}

// One component `name` of the walk, opened from `dir`: O_PATH | O_NOFOLLOW
// (so a link opens as itself and is refused here), or with `flags` for the
// last one. Closes `dir`.
int StepInto(int dir, const char* name, bool last, int flags, bool no_xdev) {
  const bool path_only = (flags & O_PATH) != 0;
  const int fd = openat(dir, name, (last && !path_only ? flags : O_PATH) | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Refuse(dir, -1, errno);
  if (const int err = WhyNot(dir, fd, last, flags, no_xdev)) return Refuse(dir, fd, err);
  close(dir);
  return fd;
}

// The walk openat2 stands for, where the kernel lacks it.
int WalkNoSymlinks(int dirfd, const char* path, int flags, bool no_xdev, bool beneath) {
  if (beneath && path[0] == '/') {
    errno = EXDEV;
    return -1;
  }
  int dir = path[0] == '/'      ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
            : dirfd == AT_FDCWD ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)
                                : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dir < 0) return -1;
  char name[NAME_MAX + 1];
  const char* p = path;
  for (;;) {
    while (*p == '/') ++p;
    const char* end = strchrnul(p, '/');
    const size_t len = static_cast<size_t>(end - p);
    const char* rest = end;
    while (*rest == '/') ++rest;
    const bool last = *rest == '\0';
    if (len == 0) break;  // "/" alone, or trailing slashes
    if (len > NAME_MAX) return Refuse(dir, -1, ENAMETOOLONG);
    if (beneath && len == 2 && p[0] == '.' && p[1] == '.') return Refuse(dir, -1, EXDEV);
    memcpy(name, p, len);
    name[len] = '\0';
    dir = StepInto(dir, name, last, flags, no_xdev);
    if (dir < 0 || last) return dir;
    p = end;
  }
  // The path named the starting directory itself.
  if (flags & O_PATH) return dir;
  const int fd = openat(dir, ".", flags | O_CLOEXEC);
  const int err = errno;
  close(dir);
  errno = err;
  return fd;
}

}  // namespace

int OpenNoSymlinksAt(int dirfd, const char* path, int flags, bool no_xdev, bool beneath) {
  if (path == nullptr || path[0] == '\0') {
    errno = ENOENT;
    return -1;
  }
  if (!beneath && FaultSkipStep("grant-links")) return openat(dirfd, path, flags | O_CLOEXEC);
  const int fd = OpenAt2(dirfd, path, flags, no_xdev, beneath);
  if (fd >= 0 || errno != ENOSYS) return fd;
  return WalkNoSymlinks(dirfd, path, flags, no_xdev, beneath);
}

}  // namespace oarbank
