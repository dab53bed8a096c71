/* MPTCP: socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP) is a stream socket whose
 * connect Landlock's TCP port rules do not check (they apply to TCP sockets
 * only), then connect to OARBANK_PROBE_TCP_PORT. What stops it: seccomp
 * refuses any protocol above IPPROTO_TCP under egress-allowlist and AF_INET
 * under net none (EPERM). ECONNREFUSED is not the host's loopback, where
 * the battery listens (under egress-any: the job's own). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

static int mptcp_enabled(void) {
  FILE *f = fopen("/proc/sys/net/mptcp/enabled", "r");
  int v = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP);
  if (fd < 0) {
    int err = errno;
    /* Only a kernel without MPTCP answers these; the filter says EPERM. */
    if (err == EPROTONOSUPPORT || err == ENOPROTOOPT || err == EINVAL)
      unsupported("socket(IPPROTO_MPTCP): %s (MPTCP not built or net.mptcp.enabled=%d)", probe_errno_name(err),
                  mptcp_enabled());
    blocked(err, "socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)");
  }
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "MPTCP connect 127.0.0.1:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("MPTCP socket connected to 127.0.0.1:%ld", port);
}
