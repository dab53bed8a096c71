/* The proxy's port number on another address, 127.0.0.2:PROXY_PORT: Landlock
 * ABI 4 filters TCP connect by port alone, so under egress-allowlist the
 * launcher lets a module reach whatever listens on that port anywhere (a
 * second loopback address here; a remote host's 3128 elsewhere), not only
 * the agent's proxy. The battery listens there on the host, so only a
 * connection is the escape (ECONNREFUSED: another loopback, such as an
 * egress-any job's own). `oarbank-agent run` closes it (the job's
 * network namespace holds nothing but its proxy's listener); the launcher
 * alone cannot, which its row states as a gap. Under net none seccomp
 * refuses socket(AF_INET) (EPERM). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_PROXY_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);  // 127.0.0.2
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "connect 127.0.0.2:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to 127.0.0.2:%ld, the proxy's port on another address", port);
}
