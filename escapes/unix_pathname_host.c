/* A pathname unix socket of the host (the session bus, docker.sock, the
 * agent's own control socket) is authority outside the cage: connect() to
 * OARBANK_PROBE_UNIX_SOCKET. A read-only bind or Landlock's filesystem rights
 * below ABI 9 do not stop a connect. What stops it: without a broker grant,
 * seccomp refuses socket(AF_UNIX) (EPERM); with a broker, Landlock ABI 9
 * RESOLVE_UNIX refuses every socket but the broker's (EACCES). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_SOCKET");
  const char *path = sa.sun_path;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_UNIX, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) blocked(errno, "connect %s", path);
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to the host socket %s", path);
}
