/* Positive control for the Landlock TCP rule: connect to the policy's proxy,
 * 127.0.0.1:OARBANK_PROBE_PROXY_PORT. Under egress-allowlist this is the one
 * TCP connection the cage grants (`allowed`); under net none seccomp refuses
 * socket(AF_INET) (EPERM). A cage that refused the proxy too would make
 * every other egress row pass for the wrong reason. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_PROXY_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "connect 127.0.0.1:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to the proxy port 127.0.0.1:%ld", port);
}
