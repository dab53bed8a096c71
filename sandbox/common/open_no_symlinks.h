// Opening a path with no symbolic link followed in any component, with
// openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where the kernel has
// it (Linux 5.6) and an equivalent walk where it does not: one component at
// a time, each opened O_PATH | O_NOFOLLOW from the one before and refused
// when it turns out to be a link. Both answer ELOOP for a link anywhere on
// the way, the last component included, and, with `no_xdev`, EXDEV for a
// mount point crossed (RESOLVE_NO_XDEV; the walk compares mount ids), and,
// with `beneath`, EXDEV for a path that would leave `dirfd`
// (RESOLVE_BENEATH; the walk refuses an absolute path and any "..").
//
// Used on both sides of a launch: the agent's walk of a grant path
// (grant_path.h) and the launcher's second open of the same canonical path
// inside the job's mount namespace, which must allocate nothing; the gate's
// read-back through the job's root; the broker's sources and output files,
// beneath the job's directories.
//
// The test-only build can make openat2 answer ENOSYS (skip step "openat2",
// common/fault_hooks.h), so the walk is tested on a kernel that has openat2.
#pragma once

namespace oarbank {

// `path` opened from `dirfd` (AT_FDCWD, or a directory; an absolute path
// starts from /) with `flags` | O_CLOEXEC and no symlink followed. The fd,
// or -1 with errno. Allocates nothing.
int OpenNoSymlinksAt(int dirfd, const char* path, int flags, bool no_xdev = false, bool beneath = false);

}  // namespace oarbank
