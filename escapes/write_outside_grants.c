/* Writing outside every grant: creating a file in a directory that no grant
 * covers (a home, a dotfile directory, another project). Landlock refuses
 * the creation (no MAKE_REG right there) with EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) blocked(errno, "create %s", path);
  ssize_t n = write(fd, "x", 1);
  close(fd);
  unlink(path);
  escaped("created %s and wrote %zd byte(s)", path, n);
}
