/* Listening: a server inside the cage reachable from the host or the
 * network. listen() on an unbound TCP socket even binds an ephemeral port by
 * itself, which Landlock's TCP bind rule never sees. What stops it: seccomp
 * refuses listen() under every policy (EPERM). Where a TCP socket can be made
 * (egress-allowlist) the probe listens for real; everywhere it also calls
 * listen(-1, 1), which an unfiltered kernel answers EBADF. (A socketpair end
 * is connected: listen() on it answers EINVAL, no more than listen(-1)
 * shows.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    /* Loopback if bind is allowed (unconfined); refused, listen auto-binds. */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)bind(fd, (struct sockaddr *)&sa, sizeof sa);
    if (listen(fd, 1) == 0) {
      socklen_t len = sizeof sa;
      getsockname(fd, (struct sockaddr *)&sa, &len);
      char addr[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
      escaped("listening on %s:%u", addr, ntohs(sa.sin_port));
    }
    if (errno != EPERM) escaped("listen on a TCP socket reached the kernel: %s", probe_errno_name(errno));
  }
  long ret = syscall(SYS_listen, -1, 1);
  verdict_reached_kernel("listen(-1, 1)", ret, errno, EPERM);
}
