/* The same loopback service over IPv6: [::1]:OARBANK_PROBE_TCP_PORT, for a
 * rule written for IPv4 only. What stops it: under net none seccomp refuses
 * socket(AF_INET6) (EPERM); under egress-allowlist Landlock's port rule
 * covers both families (EACCES); under egress-any the job's own loopback
 * has nothing listening (ECONNREFUSED: the battery listens on the host's). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET6, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "connect [::1]:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to [::1]:%ld", port);
}
