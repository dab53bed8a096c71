/* mount(2): over a grant, or a fresh exec-able tmpfs. The seccomp filter
 * refuses it with EPERM. A bad target pointer makes an unfiltered call fail
 * with EFAULT before any permission check (bubblewrap's try-syscall). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_mount, "none", (const char *)1, "tmpfs", 0UL, NULL);
  verdict_reached_kernel("mount(\"none\", <bad pointer>, \"tmpfs\")", ret, errno, EPERM);
}
