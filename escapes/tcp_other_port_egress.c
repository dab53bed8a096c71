/* Under egress-allowlist every TCP port but the proxy's is closed, whatever
 * the address says: connect to OARBANK_PROBE_TCP_PORT through the unspecified
 * addresses 0.0.0.0 and [::], which Linux routes to the local host (a filter
 * on "127.0.0.1" or on loopback addresses would not see them). What stops
 * it: Landlock's TCP connect rule names only the proxy port (EACCES); under
 * net none seccomp refuses socket(AF_INET/AF_INET6) (EPERM). The battery
 * listens there on the host, so ECONNREFUSED is another host's loopback
 * (under egress-any: the job's own network namespace's). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
    (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
    escaped("connected to 0.0.0.0:%ld (the local host)", port);
  }
  int err4 = errno;
  struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_ANY_INIT};
  int fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd6 < 0) blocked(err4, "connect 0.0.0.0:%ld; socket(AF_INET6): %s", port, probe_errno_name(errno));
  if (connect(fd6, (struct sockaddr *)&sa6, sizeof sa6) == 0) {
    (void)!write(fd6, PROBE_NAME "\n", sizeof PROBE_NAME);
    escaped("connected to [::]:%ld (the local host)", port);
  }
  blocked(err4, "connect 0.0.0.0:%ld; connect [::]:%ld: %s", port, port, probe_errno_name(errno));
}
