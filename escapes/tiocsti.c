/* TIOCSTI pushes bytes into a terminal's input queue: a sandboxed process
 * holding the agent's terminal (an inherited stdin/stderr) types commands
 * that run outside the cage once it exits (CVE-2017-5226). Landlock does not
 * mediate ioctls on inherited fds. What stops it: seccomp refuses the request
 * on any fd (EPERM). The probe never touches a real terminal: it asks on a
 * pipe, which an unfiltered kernel answers ENOTTY (the filter compares the
 * request, not the fd). */
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  int p[2];
  if (pipe(p) != 0) probe_error("pipe: %s", probe_errno_name(errno));
  char c = '#';
  long ret = syscall(SYS_ioctl, p[0], (unsigned long)TIOCSTI, &c);
  verdict_reached_kernel("ioctl(pipe, TIOCSTI)", ret, errno, EPERM);
}
