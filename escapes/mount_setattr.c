/* mount_setattr(attr_clr = MOUNT_ATTR_NOEXEC) on a writable grant's noexec
 * bind would make written files executable again. The seccomp filter
 * refuses mount_setattr with EPERM. A bad path pointer makes an unfiltered
 * call fail with EFAULT before any permission check. */
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  struct mount_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.attr_clr = MOUNT_ATTR_NOEXEC;
  long ret = syscall(SYS_mount_setattr, AT_FDCWD, (const char *)1, AT_RECURSIVE, &attr, sizeof attr);
  verdict_reached_kernel("mount_setattr(<bad pointer>, attr_clr=NOEXEC)", ret, errno, EPERM);
}
