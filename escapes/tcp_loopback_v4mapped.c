/* An IPv4 service reached through an IPv6 socket: [::ffff:127.0.0.1]:
 * OARBANK_PROBE_TCP_PORT, for a filter or rule that reasons about the socket's
 * family and the address separately. What stops it: under net none seccomp
 * refuses socket(AF_INET6) (EPERM); under egress-allowlist Landlock's port
 * rule (EACCES); under egress-any the job's own loopback has nothing
 * listening (ECONNREFUSED: the battery listens on the host's). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa.sin6_addr) != 1) probe_error("inet_pton");
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET6, SOCK_STREAM)");
  int off = 0;
  (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "connect [::ffff:127.0.0.1]:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to [::ffff:127.0.0.1]:%ld", port);
}
