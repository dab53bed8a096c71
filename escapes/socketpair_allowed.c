/* Positive control: socketpair(AF_UNIX) is a private channel with no address
 * (event loops, subprocess pipes need it) and must keep working under every
 * policy. seccomp filters socket(AF_UNIX), never socketpair. "escaped" here is
 * the expected `allowed`: a pair that carries a byte both ways. */
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_STREAM)");
  char c = 'x', d = 0, e = 0;
  if (write(sv[0], &c, 1) != 1 || read(sv[1], &d, 1) != 1 || d != 'x') blocked(errno, "write/read across the pair");
  if (write(sv[1], &c, 1) != 1 || read(sv[0], &e, 1) != 1 || e != 'x') blocked(errno, "write/read back");
  int dg[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_DGRAM)");
  escaped("socketpair(AF_UNIX) stream and datagram pairs work");
}
