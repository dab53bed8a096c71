/* TIOCLINUX on a virtual console: TIOCL_SETSEL/TIOCL_PASTESEL select text
 * and paste it back as input, the same injection as TIOCSTI by another
 * request. What stops it: seccomp refuses the request on any fd (EPERM).
 * Asked on a pipe (subcode TIOCL_PASTESEL = 3), which an unfiltered kernel
 * answers ENOTTY. */
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  int p[2];
  if (pipe(p) != 0) probe_error("pipe: %s", probe_errno_name(errno));
  char subcode = 3; /* TIOCL_PASTESEL */
  long ret = syscall(SYS_ioctl, p[0], (unsigned long)TIOCLINUX, &subcode);
  verdict_reached_kernel("ioctl(pipe, TIOCLINUX)", ret, errno, EPERM);
}
