/* Making a directory, a symbolic link, a FIFO or a socket node outside the
 * writable grants, in a directory the probe's uid may write (mode 0777): a
 * planted link or FIFO is how a job sets a trap for a host tool. Everything
 * outside the writable grants is a read-only mount (EROFS), and Landlock
 * gives no MAKE_DIR, MAKE_SYM, MAKE_FIFO or MAKE_SOCK there (EACCES)
 * behind it. What is made unconfined is removed at once. */
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  const char *outside = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char path[4][4200];
  const char *kinds[4] = {"dir", "sym", "fifo", "sock"};
  for (int i = 0; i < 4; ++i) snprintf(path[i], sizeof path[i], "%s/%s.%d.%s", outside, PROBE_NAME, (int)getpid(), kinds[i]);
  struct probe_call calls[4] = {
      probe_call("mkdir", mkdir(path[0], 0700)),
      probe_call("symlink", symlink("/", path[1])),
      probe_call("mkfifo", mkfifo(path[2], 0600)),
      probe_call("mknod(S_IFSOCK)", mknod(path[3], S_IFSOCK | 0600, 0)),
  };
  rmdir(path[0]);
  for (int i = 1; i < 4; ++i) unlink(path[i]);
  char seen[512] = "";
  int made = 0;
  for (int i = 0; i < 4; ++i) {
    made |= calls[i].ret == 0;
    size_t len = strlen(seen);
    snprintf(seen + len, sizeof seen - len, "%s%s=%s", len ? " " : "", calls[i].what,
             calls[i].ret == 0 ? "made" : probe_errno_name(calls[i].err));
  }
  if (made) escaped("outside the writable grants: %s", seen);
  blocked(calls[0].err, "%s", seen);
}
