/* Renaming a file from a writable grant to a directory outside every grant:
 * writing outside the cage by moving, not opening. The writable grant is its
 * own bind mount in the cage, so the VFS refuses a rename across mounts with
 * EXDEV; behind that Landlock refuses it (no MAKE_REG at the destination:
 * EACCES, which Landlock puts before EXDEV). */
#include <fcntl.h>
#include <stdio.h>

#include "probe.h"

int main(void) {
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char from[4096], to[4096];
  snprintf(from, sizeof from, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());
  snprintf(to, sizeof to, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  int fd = open(from, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) probe_error("create %s in the writable grant: %s", from, strerror(errno));
  write(fd, "moved\n", 6);
  close(fd);
  if (rename(from, to) != 0) {
    int err = errno;
    unlink(from);
    blocked(err, "rename %s -> %s", from, to);
  }
  unlink(to);
  escaped("renamed %s to %s", from, to);
}
