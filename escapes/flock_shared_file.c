/* A lock is a channel out: a job takes flock(LOCK_SH) on a file it shares
 * read-only with the host (its bundle), and any process outside that can
 * open the same file sees the lock come and go (a conflicting flock, or
 * the inode's line in the host's /proc/locks, which lists every lock of
 * the system whatever the mount namespace). Reading a file is all it takes,
 * and no kernel mechanism refuses a lock by file: Landlock has no right for
 * it and seccomp cannot tell the job's own files from shared ones. A known
 * gap (docs/enforcement.md); the probe says escaped whenever the lock is
 * taken. */
#include <sys/file.h>

#include "probe.h"

int main(void) {
  const char* bundle = probe_env("OARBANK_PROBE_BUNDLE");
  int fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) probe_error("open %s: %s", bundle, strerror(errno));
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) blocked(errno, "flock(%s, LOCK_SH)", bundle);
  escaped("flock(LOCK_SH) on %s, a directory shared read-only with the host: visible outside", bundle);
}
