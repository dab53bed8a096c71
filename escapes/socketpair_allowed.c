/* Positive control: a stream or seqpacket socketpair(AF_UNIX) is a private
 * channel with no address (event loops, subprocess pipes need it) and must
 * keep working under every policy. seccomp refuses socket(AF_UNIX) and the
 * datagram pair (unix_socketpair_sendto_host), never these. "escaped" here is
 * the expected `allowed`: pairs that carry a byte both ways. */
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_STREAM)");
  char c = 'x', d = 0, e = 0;
  if (write(sv[0], &c, 1) != 1 || read(sv[1], &d, 1) != 1 || d != 'x') blocked(errno, "write/read across the pair");
  if (write(sv[1], &c, 1) != 1 || read(sv[0], &e, 1) != 1 || e != 'x') blocked(errno, "write/read back");
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) blocked(errno, "socketpair(AF_UNIX, SOCK_SEQPACKET)");
  if (write(sp[0], &c, 1) != 1 || read(sp[1], &d, 1) != 1 || d != 'x') blocked(errno, "write/read across the seqpacket pair");
  escaped("socketpair(AF_UNIX) stream and seqpacket pairs work");
}
