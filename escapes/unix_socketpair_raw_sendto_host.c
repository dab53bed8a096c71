/* unix_socketpair_sendto_host with SOCK_RAW for the type: the unix family
 * quietly makes a SOCK_RAW socket a SOCK_DGRAM one (no capability needed),
 * so a filter that refuses only SOCK_DGRAM pairs lets this one through, and
 * sendto() names a host socket from it. The harness reads the pathname
 * datagram socket at OARBANK_PROBE_UNIX_DGRAM_SOCKET; "escaped" means it
 * received this probe's name. What stops it: without a broker grant, seccomp
 * refuses socketpair(AF_UNIX, SOCK_RAW) (EPERM); with a broker, Landlock ABI
 * 9 RESOLVE_UNIX refuses the send (EACCES). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_DGRAM_SOCKET");
  const char *path = sa.sun_path;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_RAW | SOCK_CLOEXEC, 0, sv) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_RAW)");
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(sv[0], msg, sizeof msg - 1, 0, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) blocked(errno, "sendto %s from one end of a SOCK_RAW pair", path);
  escaped("sent a %zd-byte datagram to the host socket %s from a SOCK_RAW socketpair end", n, path);
}
