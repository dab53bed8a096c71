/* A service on the host's loopback (127.0.0.1:OARBANK_PROBE_TCP_PORT)
 * reached directly, or through the job's own egress proxy: CONNECT
 * localhost:PORT, a name the host resolves to its loopback. What stops it:
 * under net none seccomp refuses socket(AF_INET) (EPERM); under
 * egress-allowlist Landlock allows TCP connect to the proxy port only
 * (EACCES), and under `run` (OARBANK_PROBE_SUPERVISED) the job's proxy
 * answers 403 (read as EACCES): localhost names loopback, it is not on the
 * allowlist, it resolves to loopback, and loopback is an address of the
 * proxy's own host, four checks each of which refuses it alone; where no proxy
 * serves the job (egress-any, a job's own loopback) nothing listens
 * (ECONNREFUSED). Under sandbox-exec the proxy port is the battery's
 * stand-in listener, which never answers: it is not asked. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "probe.h"

static int connect_loopback(long port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  long proxy = probe_env_long("OARBANK_PROBE_PROXY_PORT");
  int fd = connect_loopback(port);
  if (fd >= 0) {
    (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
    escaped("connected to 127.0.0.1:%ld directly", port);
  }
  int direct = errno;
  const char *supervised = getenv("OARBANK_PROBE_SUPERVISED");
  if (supervised == NULL || strcmp(supervised, "1") != 0)
    blocked(direct, "connect 127.0.0.1:%ld (no proxy of the job's own to ask)", port);
  fd = connect_loopback(proxy);
  if (fd < 0) blocked(errno, "directly %s; the proxy port 127.0.0.1:%ld", probe_errno_name(direct), proxy);
  /* The job's proxy answers at once; the bound is for a proxy that hangs. */
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char request[128];
  int n = snprintf(request, sizeof request, "CONNECT localhost:%ld HTTP/1.1\r\nHost: localhost:%ld\r\n\r\n", port, port);
  if (write(fd, request, (size_t)n) != n) blocked(errno, "writing the CONNECT to the proxy");
  char answer[512];
  ssize_t got = 0;
  while (got < (ssize_t)sizeof answer - 1) {
    ssize_t r = read(fd, answer + got, sizeof answer - 1 - (size_t)got);
    if (r <= 0) break;
    got += r;
    answer[got] = '\0';
    if (strstr(answer, "\r\n\r\n")) break;
  }
  answer[got] = '\0';
  char *eol = strstr(answer, "\r\n");
  if (eol) *eol = '\0';
  if (strncmp(answer, "HTTP/1.1 200", 12) == 0) {
    (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
    escaped("the proxy tunnelled to localhost:%ld (%s)", port, answer);
  }
  if (strncmp(answer, "HTTP/1.1 403", 12) == 0) blocked(EACCES, "the proxy refused localhost:%ld: %s", port, answer);
  blocked(EPROTO, "the proxy answered \"%s\" for localhost:%ld", got > 0 ? answer : "nothing", port);
}
