/* AF_VSOCK: a channel to the hypervisor and other guests (on this kind of VM
 * the host's agent listens on vsock ports), past every IP rule. What stops
 * it: seccomp refuses the family (EPERM). Only the socket is made; nothing is
 * connected. */
#include <sys/socket.h>
/* After sys/socket.h: the UAPI header uses struct sockaddr without it. */
#include <linux/vm_sockets.h>

#include "probe.h"

int main(void) {
  int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) escaped("socket(AF_VSOCK, SOCK_STREAM) made fd %d", fd);
  if (errno != EPERM) escaped("socket(AF_VSOCK) reached the kernel: %s", probe_errno_name(errno));
  /* The vsock family checks no capability, but ask again the try-syscall
   * way so that a kernel EPERM could not pass for the filter's. */
  long ret = socket(AF_VSOCK, 0xf /* >= SOCK_MAX */, 0);
  verdict_reached_kernel("socket(AF_VSOCK, invalid type)", ret, errno, EPERM);
}
