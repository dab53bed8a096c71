/* Binding an address of its own (a port, an abstract unix name that host
 * processes can find): the first half of a server, or of squatting a name a
 * host service expects. What stops it: seccomp refuses bind() on every family
 * under every policy (EPERM). The probe binds for real where it can (an IPv4
 * socket to 127.0.0.1:0 where one can be made; a socketpair end, allowed
 * everywhere, to an abstract name), then calls bind(-1, ...), which an
 * unfiltered kernel answers EBADF. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_in sin = {.sin_family = AF_INET};
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0) {
      socklen_t len = sizeof sin;
      getsockname(fd, (struct sockaddr *)&sin, &len);
      escaped("bound 127.0.0.1:%u", ntohs(sin.sin_port));
    }
    if (errno != EPERM) escaped("bind on a TCP socket reached the kernel: %s", probe_errno_name(errno));
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0) {
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int n = snprintf(sun.sun_path + 1, sizeof sun.sun_path - 1, "oarbank-probe-bind-%d", (int)getpid());
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (bind(sv[0], (struct sockaddr *)&sun, len) == 0) escaped("bound the abstract name @%s", sun.sun_path + 1);
    if (errno != EPERM) escaped("bind on a socketpair end reached the kernel: %s", probe_errno_name(errno));
  }
  long ret = syscall(SYS_bind, -1, &sin, sizeof sin);
  verdict_reached_kernel("bind(-1, 127.0.0.1)", ret, errno, EPERM);
}
