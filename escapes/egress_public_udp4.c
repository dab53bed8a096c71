/* A UDP datagram to a public test host's IPv4 address,
 * $OARBANK_PROBE_PUBLIC4:$OARBANK_PROBE_EGRESS_PORT, which answers "ECHO".
 * The positive control of egress-any for UDP (DNS, QUIC). What stops it
 * elsewhere: seccomp refuses the socket under net none and SOCK_DGRAM under
 * egress-allowlist (EPERM). Escaped only on the server's answer: through a
 * user-mode stack, a datagram sent is not yet a datagram delivered. */
#include "probe_net.h"

int main(void) {
  const char *host = probe_net_env("OARBANK_PROBE_PUBLIC4");
  long port = strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10);
  struct sockaddr_storage ss;
  socklen_t len = probe_net_address(host, port, &ss);
  int fd = probe_net_socket(host, SOCK_DGRAM);
  if (fd < 0) blocked(errno, "socket for %s", host);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) blocked(errno, "connect (UDP) %s", host);
  static const char msg[] = PROBE_NAME "\n";
  if (send(fd, msg, sizeof msg - 1, 0) < 0) blocked(errno, "send to %s", host);
  char answer[128] = "";
  ssize_t n = recv(fd, answer, sizeof answer - 1, 0);
  if (n < 0) blocked(errno == EAGAIN ? ETIMEDOUT : errno, "sent to %s, no answer", host);
  answer[n] = '\0';
  if (strncmp(answer, "ECHO ", 5) != 0) probe_error("%s answered something else: %s", host, answer);
  escaped("the public test host %s answered over UDP", host);
}
