/* UDP past a TCP-only egress policy (DNS exfiltration, QUIC), the way a
 * filter keyed on (AF_INET, SOCK_DGRAM) could miss: an IPv6 socket whose type
 * carries SOCK_NONBLOCK | SOCK_CLOEXEC, sending to the IPv4 listener through
 * [::ffff:127.0.0.1]:OARBANK_PROBE_UDP_PORT. Landlock below ABI 10 does not
 * cover UDP. What stops it: seccomp refuses SOCK_DGRAM on AF_INET6 under
 * egress-allowlist (the type is compared under the 0xf mask; protocol 0, so
 * the "protocol > IPPROTO_TCP" row cannot be what refuses it) and AF_INET6
 * under net none (EPERM). A datagram sendto() accepted says "sent": the
 * battery's listener says whether it arrived (under egress-any it goes to
 * the job's own loopback and never does). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_UDP_PORT");
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa.sin6_addr) != 1) probe_error("inet_pton");
  int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)");
  int off = 0;
  (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(fd, msg, sizeof msg - 1, 0, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) blocked(errno, "sendto [::ffff:127.0.0.1]:%ld", port);
  sent("sent a %zd-byte UDP datagram to [::ffff:127.0.0.1]:%ld", n, port);
}
