/* seccomp_new_listener with the operation's upper 32 bits set: the kernel
 * reads `op` as an unsigned int, so 0x100000001 is SECCOMP_SET_MODE_FILTER
 * to it, while a filter comparing all 64 bits with 1 sees another value and
 * lets the call through. The cage compares the low 32 bits only: EPERM. A
 * NULL program makes an unfiltered call fail with EFAULT before anything is
 * installed. */
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  const unsigned long op = (1ul << 32) | SECCOMP_SET_MODE_FILTER;
  long ret = syscall(SYS_seccomp, op, SECCOMP_FILTER_FLAG_NEW_LISTENER, NULL);
  verdict_reached_kernel("seccomp(1 << 32 | SET_MODE_FILTER, NEW_LISTENER, NULL)", ret, errno, EPERM);
}
