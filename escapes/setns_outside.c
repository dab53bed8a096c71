/* Joining the network namespace of a process outside the cage. Opening
 * /proc/<pid>/ns/net takes a ptrace read check, which Landlock (ptrace
 * scoping) and the user namespace refuse: EACCES. Behind it the seccomp
 * filter refuses setns with EPERM; where the open is refused the detail
 * also says what setns(-1) answered (EPERM filtered, EBADF unfiltered). */
#include <fcntl.h>
#include <sched.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    int probe_ret = setns(-1, CLONE_NEWNET);
    int probe_err = errno;
    blocked(err, "open %s (setns(-1, CLONE_NEWNET) answered %s)", path,
            probe_ret == 0 ? "0" : probe_errno_name(probe_err));
  }
  if (setns(fd, CLONE_NEWNET) == 0) escaped("joined the network namespace of outside pid %ld", pid);
  int err = errno;
  if (err == EPERM) blocked(err, "setns(%s, CLONE_NEWNET)", path);
  escaped("setns(%s) reached the kernel: %s", path, probe_errno_name(err));
}
