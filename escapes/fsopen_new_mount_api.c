/* The new mount API (fsopen/fsconfig/fsmount, fspick) mounts without
 * mount(2), around a filter that denies only mount. The seccomp filter
 * refuses all four with EPERM. fsopen("tmpfs") works outright for root
 * unconfined; fspick on "/", fsconfig and fsmount on fd -1 answer
 * EPERM-for-no-capability, EBADF or EINVAL in the kernel. Escaped if any
 * call answers other than EPERM. */
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  char seen[256] = "";
  int reached = 0;
  struct {
    const char *what;
    long ret;
    int err;
  } calls[4];
  calls[0].what = "fsopen(\"tmpfs\")";
  calls[0].ret = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  calls[0].err = errno;
  calls[1].what = "fspick(\"/\")";
  calls[1].ret = syscall(SYS_fspick, AT_FDCWD, "/", FSPICK_CLOEXEC);
  calls[1].err = errno;
  calls[2].what = "fsconfig(-1, CREATE)";
  calls[2].ret = syscall(SYS_fsconfig, -1, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
  calls[2].err = errno;
  calls[3].what = "fsmount(-1)";
  calls[3].ret = syscall(SYS_fsmount, -1, FSMOUNT_CLOEXEC, 0);
  calls[3].err = errno;
  for (int i = 0; i < 4; ++i) {
    size_t len = strlen(seen);
    const char *answer = calls[i].ret >= 0 ? "ok" : probe_errno_name(calls[i].err);
    snprintf(seen + len, sizeof seen - len, "%s%s=%s", len ? ", " : "", calls[i].what, answer);
    if (calls[i].ret >= 0 || calls[i].err != EPERM) reached = 1;
  }
  if (reached) escaped("new mount API reached the kernel: %s", seen);
  blocked(EPERM, "%s", seen);
}
