/* setns joins the namespace an fd names: another process's, reached
 * through /proc/PID/ns or a pidfd. The seccomp filter refuses it (EPERM)
 * whatever the fd; setns_outside tries a real one, where the kernel's own
 * capability check answers EPERM as well. Here the fd is bad, which an
 * unfiltered kernel answers EBADF: the row itself is what answers. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_setns, -1, 0);
  verdict_reached_kernel("setns(-1, 0)", ret, errno, EPERM);
}
