/* TCP Fast Open: sendto(MSG_FASTOPEN) to an unconnected TCP socket connects
 * and sends in one call, without connect(), so a check hooked on connect()
 * alone does not see it. Target: 127.0.0.1:OARBANK_PROBE_TCP_PORT. What
 * stops it: under net none seccomp refuses socket(AF_INET) (EPERM); under
 * egress-allowlist the port must be refused all the same, by Landlock's TCP
 * connect rule (EACCES) if it covers the Fast Open path, else by seccomp on
 * MSG_FASTOPEN (EPERM). ECONNREFUSED is not the host's loopback, where the
 * battery listens (under egress-any: the job's own). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  static const char msg[] = PROBE_NAME "\n";
  ssize_t n = sendto(fd, msg, sizeof msg - 1, MSG_FASTOPEN, (struct sockaddr *)&sa, sizeof sa);
  if (n < 0) {
    int err = errno;
    if (err == EOPNOTSUPP) unsupported("sendto(MSG_FASTOPEN): EOPNOTSUPP (net.ipv4.tcp_fastopen has no client bit)");
    blocked(err, "sendto(MSG_FASTOPEN) 127.0.0.1:%ld", port);
  }
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0)
    escaped("sendto(MSG_FASTOPEN) connected to 127.0.0.1:%ld and queued %zd bytes", port, n);
  escaped("sendto(MSG_FASTOPEN) to 127.0.0.1:%ld queued %zd bytes", port, n);
}
