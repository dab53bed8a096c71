/* TIOCLINUX with bit 32 set in the request: the kernel reads the request as
 * a 32-bit int and still sees TIOCLINUX, while a filter comparing the whole
 * 64-bit argument does not match. What stops it: seccomp compares the
 * request's low 32 bits only (EPERM). Asked on a pipe (subcode
 * TIOCL_PASTESEL = 3), which an unfiltered kernel answers ENOTTY. */
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  int p[2];
  if (pipe(p) != 0) probe_error("pipe: %s", probe_errno_name(errno));
  char subcode = 3; /* TIOCL_PASTESEL */
  long ret = syscall(SYS_ioctl, p[0], (1UL << 32) | TIOCLINUX, &subcode);
  verdict_reached_kernel("ioctl(pipe, TIOCLINUX | 1 << 32)", ret, errno, EPERM);
}
