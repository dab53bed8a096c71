/* uselib(2), the a.out-era loader call: it maps a file executable with its
 * own checks, apart from execve and mmap. The seccomp filter refuses it with
 * EPERM. A bad path pointer makes an unfiltered call fail with EFAULT; a
 * kernel without uselib (CONFIG_USELIB=n, or 6.14+, where it was removed)
 * answers ENOSYS: unsupported. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
#ifndef SYS_uselib
  unsupported("no uselib(2) on this architecture");
#else
  long ret = syscall(SYS_uselib, (const char *)1);
  if (ret < 0 && errno == ENOSYS) unsupported("kernel without uselib(2) (ENOSYS: CONFIG_USELIB=n or removed)");
  verdict_reached_kernel("uselib(<bad pointer>)", ret, errno, EPERM);
#endif
}
