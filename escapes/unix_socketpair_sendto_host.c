/* A unix datagram pair needs no socket() call, yet either end is still a
 * datagram socket: sendto() may name any address, and the datagram goes to
 * the host socket there (syslog's /dev/log, the journal, notify sockets), not
 * to the other end. The harness reads the pathname datagram socket at
 * OARBANK_PROBE_UNIX_DGRAM_SOCKET; "escaped" means it received this probe's
 * name. What stops it: without a broker grant, seccomp refuses
 * socketpair(AF_UNIX, SOCK_DGRAM) (EPERM); with a broker, Landlock ABI 9
 * RESOLVE_UNIX refuses the send (EACCES). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_DGRAM_SOCKET");
  const char *path = sa.sun_path;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_DGRAM)");
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(sv[0], msg, sizeof msg - 1, 0, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) blocked(errno, "sendto %s from one end of the pair", path);
  escaped("sent a %zd-byte datagram to the host socket %s from a socketpair end", n, path);
}
