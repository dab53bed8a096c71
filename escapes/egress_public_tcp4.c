/* A TCP connection to a public test host's IPv4 address,
 * $OARBANK_PROBE_PUBLIC4:$OARBANK_PROBE_EGRESS_PORT, which answers "HELLO".
 * The positive control of egress-any: its job reaches public addresses,
 * through the user-mode stack, past the job's ruleset. What stops it
 * elsewhere: under net none seccomp refuses the socket (EPERM); under
 * egress-allowlist Landlock allows TCP connect to the proxy port only
 * (EACCES). Escaped only on the server's answer. */
#include "probe_net.h"

int main(void) {
  const char *host = probe_net_env("OARBANK_PROBE_PUBLIC4");
  long port = strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10);
  struct sockaddr_storage ss;
  socklen_t len = probe_net_address(host, port, &ss);
  int fd = probe_net_socket(host, SOCK_STREAM);
  if (fd < 0) blocked(errno, "socket for %s", host);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) blocked(errno == EINPROGRESS ? ETIMEDOUT : errno, "connect %s", host);
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  char answer[128] = "";
  ssize_t n = read(fd, answer, sizeof answer - 1);
  if (n <= 0) blocked(n < 0 ? errno : ECONNRESET, "connected to %s, but no answer", host);
  answer[n] = '\0';
  if (strncmp(answer, "HELLO ", 6) != 0) probe_error("%s answered something else: %s", host, answer);
  escaped("the public test host %s answered over TCP", host);
}
