/* perf events observe other processes and the kernel (and are a frequent
 * source of kernel bugs). The seccomp filter refuses perf_event_open with
 * EPERM. A NULL attr makes an unfiltered call fail with EFAULT before any
 * permission check; a kernel without perf events answers ENOSYS. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0UL);
  if (ret < 0 && errno == ENOSYS) unsupported("kernel built without perf events (ENOSYS)");
  verdict_reached_kernel("perf_event_open(NULL)", ret, errno, EPERM);
}
