/* chroot, half of the classic chroot-escape (and a way to resolve paths
 * differently from the launcher's view). The seccomp filter refuses it with
 * EPERM. A bad path pointer makes an unfiltered call fail with EFAULT
 * before the capability check. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_chroot, (const char *)1);
  verdict_reached_kernel("chroot(<bad pointer>)", ret, errno, EPERM);
}
