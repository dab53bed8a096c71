/* An fd the launcher's parent left open (not close-on-exec) on a file
 * outside the grants: Landlock checks opens, not reads on an fd opened
 * before the ruleset. The launcher marks every fd above 2 close-on-exec
 * (close_range CLOSE_RANGE_CLOEXEC) before exec: read answers EBADF. */
#include "probe.h"

int main(void) {
  long fd = probe_env_long("OARBANK_PROBE_INHERITED_FD");
  char buf[64];
  ssize_t n = pread((int)fd, buf, sizeof buf, 0);
  if (n < 0 && errno == ESPIPE) n = read((int)fd, buf, sizeof buf);
  if (n < 0) blocked(errno, "read inherited fd %ld", fd);
  escaped("read %zd bytes from inherited fd %ld", n, fd);
}
