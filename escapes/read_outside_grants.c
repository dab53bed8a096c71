/* Reading a file outside every grant (a home, an SSH key). Landlock refuses
 * the open with EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  int fd = open(secret, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", secret);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) blocked(errno, "read %s", secret);
  escaped("read %zd bytes of %s", n, secret);
}
