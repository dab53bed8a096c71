/* SCTP: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), a stream socket of a
 * protocol no user-mode stack carries and whose module the kernel loads on
 * first use (a long line of SCTP CVEs). Reaching the kernel is the escape:
 * the socket is made, or the kernel answers EPROTONOSUPPORT after asking
 * for the module (without SCTP built or loadable) where the filter would
 * have said EPERM first.
 * What stops it: seccomp refuses AF_INET under net none, protocols above
 * IPPROTO_TCP under egress-allowlist and SCTP under egress-any (EPERM). */
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif

int main(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_SCTP);
  if (fd >= 0) escaped("socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) made an SCTP socket");
  int err = errno;
  if (err == EPROTONOSUPPORT)
    escaped("socket(IPPROTO_SCTP) reached the kernel: EPROTONOSUPPORT (it looked for an SCTP module)");
  blocked(err, "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)");
}
