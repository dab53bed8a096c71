/* A link the job makes in its writable grant, pointing into a directory
 * outside every grant, then a file created through it: a sandbox that
 * allows writes by the path it was given writes wherever the link leads
 * (Claude Code CVE-2026-39861). The file would land in a directory the
 * probe's uid may write (mode 0777), so only the cage refuses it: the
 * read-only mounts (EROFS) and Landlock (EACCES) behind them. */
#include "probe.h"

int main(void) {
  const char* dir = probe_env("OARBANK_PROBE_WRITABLE");
  const char* outside = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char link[4096], through[4200], target[4200];
  snprintf(link, sizeof link, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  if (symlink(outside, link) != 0) probe_error("symlink %s -> %s: %s", link, outside, strerror(errno));
  snprintf(through, sizeof through, "%s/%s.%d", link, PROBE_NAME, (int)getpid());
  snprintf(target, sizeof target, "%s/%s.%d", outside, PROBE_NAME, (int)getpid());
  int fd = open(through, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int err = errno;
  unlink(link);
  if (fd < 0) blocked(err, "create %s (through a link to %s)", through, outside);
  close(fd);
  unlink(target);
  escaped("created %s through a link in the writable grant", target);
}
