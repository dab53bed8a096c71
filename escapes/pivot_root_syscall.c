/* pivot_root swaps the root mount. The seccomp filter refuses it with EPERM.
 * Bad path pointers make an unfiltered call fail with EFAULT (after the
 * may_mount check, which root passes unconfined). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_pivot_root, (const char *)1, (const char *)1);
  verdict_reached_kernel("pivot_root(<bad pointer>, <bad pointer>)", ret, errno, EPERM);
}
