/* Writing into the runtime: the interpreter or libraries the policy lends
 * the module are read+execute only, like the bundle, so a module cannot
 * change what a later run executes. The read-only mounts answer EROFS; the
 * runtime's Landlock rules grant no write or make right behind them
 * (EACCES). The runtime belongs to root (mode 0755): as uid 65534 the file
 * permissions refuse too, so the root cells are the ones that prove it. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_RUNTIME");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) blocked(errno, "create %s", path);
  ssize_t n = write(fd, "x", 1);
  close(fd);
  unlink(path);
  escaped("created %s in the runtime and wrote %zd byte(s)", path, n);
}
