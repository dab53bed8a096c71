/* An abstract unix socket (no file, so no filesystem rule can name it) of a
 * process outside the cage: connect() to "\0" OARBANK_PROBE_ABSTRACT_SOCKET.
 * What stops it: without a broker grant, seccomp refuses socket(AF_UNIX)
 * itself (EPERM); with a broker, the Landlock ABI 6 abstract-unix scope
 * refuses a connect to a server outside the domain (EPERM). */
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  const char *name = probe_env("OARBANK_PROBE_ABSTRACT_SOCKET");
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(name);
  if (len + 1 > sizeof sa.sun_path) probe_error("abstract name too long: %s", name);
  memcpy(sa.sun_path + 1, name, len); /* sun_path[0] stays NUL */
  socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_UNIX, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, salen) != 0) blocked(errno, "connect @%s", name);
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to the abstract socket @%s", name);
}
