/* Stealing a file descriptor from the job's init (OARBANK_PROBE_INIT_PID, as
 * in ptrace_job_init.c): pidfd_getfd(pidfd, 0) would duplicate its fd 0.
 * Refused by seccomp under every policy, debug too (EPERM); the kernel's
 * ptrace-attach check stands behind it (the init is not dumpable). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_INIT_PID");
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  long fd = syscall(SYS_pidfd_getfd, pidfd, 0, 0);
  if (fd >= 0) escaped("pidfd_getfd stole fd %ld from the init, pid %ld", fd, pid);
  verdict_reached_kernel(pidfd >= 0 ? "pidfd_getfd(pidfd of the init, 0)" : "pidfd_getfd(-1, 0)", -1, errno, EPERM);
}
