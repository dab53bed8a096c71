/* A UDP datagram to a loopback service (DNS resolvers, metrics, anything
 * listening on 127.0.0.1): sendto 127.0.0.1:OARBANK_PROBE_UDP_PORT. Landlock
 * below ABI 10 does not cover UDP at all. A datagram sendto() accepted says
 * "sent": the battery's listener says whether it arrived (under egress-any
 * it goes to the job's own loopback and never does). What stops it: seccomp
 * refuses socket(AF_INET) under net none and SOCK_DGRAM under
 * egress-allowlist (EPERM). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_UDP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_DGRAM)");
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(fd, msg, sizeof msg - 1, 0, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) blocked(errno, "sendto 127.0.0.1:%ld", port);
  sent("sent a %zd-byte datagram to 127.0.0.1:%ld", n, port);
}
