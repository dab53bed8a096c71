/* The host's shared memory from inside a job: a file the harness planted in
 * the host's /dev/shm (POSIX shm_open and sem_open names live there), opened
 * by its path. A supervised job has a /dev/shm tmpfs of its own (so that
 * multiprocessing works), which must not be the host's: the planted file is
 * not there (ENOENT). Runs under the supervisor (a job_* probe). Nothing is
 * written to the host's file. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *path = probe_env("OARBANK_PROBE_HOST_SHM");
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  char buf[8] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n > 0 && strncmp(buf, "host", 4) == 0) escaped("read the host's %s", path);
  blocked(0, "%s opened but is not the host's file", path);
}
