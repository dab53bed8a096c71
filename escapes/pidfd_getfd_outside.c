/* Stealing a file descriptor from a process outside the cage:
 * pidfd_getfd(pidfd, 0) duplicates its fd 0 into the probe (a socket to the
 * agent, an open secret). The seccomp filter refuses pidfd_getfd with EPERM
 * (the ptrace-attach check behind it would too). If pidfd_open itself fails,
 * pidfd -1 still shows whether pidfd_getfd reaches the kernel (EBADF). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  const char *which = pidfd >= 0 ? "pidfd of the outside pid" : "pidfd -1 (pidfd_open failed)";
  long fd = syscall(SYS_pidfd_getfd, pidfd, 0, 0);
  if (fd >= 0) escaped("pidfd_getfd(%s, 0) stole fd %ld from pid %ld", which, fd, pid);
  verdict_reached_kernel(pidfd >= 0 ? "pidfd_getfd(pidfd of the outside pid, 0)" : "pidfd_getfd(-1, 0)", -1, errno, EPERM);
}
