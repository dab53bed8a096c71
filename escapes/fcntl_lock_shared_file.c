/* The record-lock variant of flock_shared_file: a read lock by fcntl
 * (F_SETLK, and F_OFD_SETLK, whose lock belongs to the open file rather
 * than the process) on a file the job shares read-only with the host. A
 * process outside sees it with F_GETLK or in /proc/locks. sqlite, git's
 * packfile users and make's jobserver take such locks on their own files,
 * and seccomp cannot tell those from a shared one, so this is a known gap
 * (docs/enforcement.md); the probe says escaped whenever a lock is taken. */
#include "probe.h"

#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

int main(void) {
  const char* bundle = probe_env("OARBANK_PROBE_BUNDLE");
  char file[4096];
  snprintf(file, sizeof file, "%s/%s", bundle, PROBE_NAME);
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) probe_error("open %s: %s", file, strerror(errno));
  struct flock lock = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  int ofd = fcntl(fd, F_OFD_SETLK, &lock);
  int ofd_err = errno;
  struct flock posix = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1};
  int rc = fcntl(fd, F_SETLK, &posix);
  int posix_err = errno;
  if (ofd == 0 || rc == 0)
    escaped("read lock on %s, a file shared read-only with the host (F_OFD_SETLK %s, F_SETLK %s): visible outside",
            file, ofd == 0 ? "taken" : probe_errno_name(ofd_err), rc == 0 ? "taken" : probe_errno_name(posix_err));
  blocked(ofd_err, "F_OFD_SETLK=%s F_SETLK=%s on %s", probe_errno_name(ofd_err), probe_errno_name(posix_err), file);
}
