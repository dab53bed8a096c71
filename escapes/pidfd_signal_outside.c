/* Signalling a process outside the cage through a pidfd: pidfd_open is not
 * filtered (it only names a process), pidfd_send_signal(fd, 0) takes the
 * same checks as kill. Landlock's signal scoping (ABI 6) refuses it with
 * EPERM. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) blocked(errno, "pidfd_open(%ld)", pid);
  if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0)
    escaped("pidfd_send_signal(pidfd of %ld, 0) allowed: a real signal would be delivered", pid);
  blocked(errno, "pidfd_send_signal(pidfd of %ld, 0)", pid);
}
