/* A TCP connection to a service on the host's loopback (a database, a
 * metadata proxy, the agent's own ports): 127.0.0.1:OARBANK_PROBE_TCP_PORT.
 * What stops it: under net none seccomp refuses socket(AF_INET) (EPERM);
 * under egress-allowlist Landlock allows TCP connect to the proxy port only
 * (EACCES); under egress-any the job's loopback is its own network
 * namespace's, where nothing listens (ECONNREFUSED): the battery listens on
 * the host's, so ECONNREFUSED is never the host's loopback. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    blocked(errno, "connect 127.0.0.1:%ld", port);
  }
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to 127.0.0.1:%ld", port);
}
