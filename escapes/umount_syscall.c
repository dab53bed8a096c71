/* umount2: removing the noexec bind of a writable grant would expose the
 * exec-able mount beneath. The seccomp filter refuses it with EPERM. A bad
 * path pointer makes an unfiltered call fail with EFAULT first. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_umount2, (const char *)1, 0);
  verdict_reached_kernel("umount2(<bad pointer>, 0)", ret, errno, EPERM);
}
