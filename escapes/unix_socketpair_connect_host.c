/* The other way out of a unix datagram pair: connect() on a datagram socket
 * may be called again at any time and re-targets it, so one end of a pair
 * can be pointed at a host socket and then written with plain send(). The
 * harness reads the pathname datagram socket at
 * OARBANK_PROBE_UNIX_DGRAM_SOCKET; "escaped" means it received this probe's
 * name. What stops it: without a broker grant, seccomp refuses
 * socketpair(AF_UNIX, SOCK_DGRAM) (EPERM); with a broker, Landlock ABI 9
 * RESOLVE_UNIX refuses the connect (EACCES). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_DGRAM_SOCKET");
  const char *path = sa.sun_path;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_DGRAM)");
  if (connect(sv[0], (struct sockaddr *)&sa, sizeof sa) != 0) blocked(errno, "connect %s from one end of the pair", path);
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = send(sv[0], msg, sizeof msg - 1, 0);
  if (n < 0) blocked(errno, "send to %s after connect", path);
  escaped("re-targeted a socketpair end at the host socket %s and sent %zd bytes", path, n);
}
