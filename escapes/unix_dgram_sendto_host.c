/* A datagram to a host's pathname unix socket (syslog's /dev/log, the
 * journal, notify sockets) needs no connect: sendto() names the path. The
 * harness listens with a SOCK_DGRAM socket at OARBANK_PROBE_UNIX_DGRAM_SOCKET;
 * "escaped" means the datagram was delivered. What stops it: without a broker
 * grant, seccomp refuses socket(AF_UNIX) (EPERM); with a broker, Landlock ABI
 * 9 RESOLVE_UNIX refuses the send (EACCES). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_DGRAM_SOCKET");
  const char *path = sa.sun_path;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_UNIX, SOCK_DGRAM)");
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(fd, msg, sizeof msg - 1, 0, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) blocked(errno, "sendto %s", path);
  escaped("sent a %zd-byte datagram to the host socket %s", n, path);
}
