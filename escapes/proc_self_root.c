/* Path substitution through /proc: /proc is in the base system, so
 * /proc/self/root/<secret> is a second spelling of the secret's path.
 * Landlock checks the object a path resolves to, not the spelling, and
 * refuses it with EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  char path[4096];
  snprintf(path, sizeof path, "/proc/self/root%s", secret);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) blocked(errno, "read %s", path);
  escaped("read %zd bytes of %s", n, path);
}
