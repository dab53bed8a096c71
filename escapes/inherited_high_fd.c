/* inherited_fd's attempt at an fd above 1023 (FD_SETSIZE): a launcher that
 * closes inherited fds by looping up to 1024, or up to a limit it read, leaves
 * this one open on the secret. The launcher's close_range(3, ~0U,
 * CLOSE_RANGE_CLOEXEC) covers every number: read answers EBADF. */
#include "probe.h"

int main(void) {
  long fd = probe_env_long("OARBANK_PROBE_INHERITED_HIGH_FD");
  if (fd < 1024) probe_error("OARBANK_PROBE_INHERITED_HIGH_FD=%ld is not above 1023", fd);
  char buf[64];
  ssize_t n = pread((int)fd, buf, sizeof buf, 0);
  if (n < 0) blocked(errno, "read inherited fd %ld", fd);
  escaped("read %zd bytes from inherited fd %ld", n, fd);
}
