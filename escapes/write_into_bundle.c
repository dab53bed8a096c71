/* Writing into the bundle: the module's own code is read+execute only, so a
 * module cannot plant code that a later (possibly more privileged) run
 * executes. Landlock grants the bundle no write or make rights: EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_BUNDLE");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) blocked(errno, "create %s", path);
  ssize_t n = write(fd, "x", 1);
  close(fd);
  unlink(path);
  escaped("created %s in the bundle and wrote %zd byte(s)", path, n);
}
