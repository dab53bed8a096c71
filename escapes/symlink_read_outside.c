/* A link the job makes in its writable grant, pointing at a file outside
 * every grant, then opened through the link: a sandbox that checks the
 * path it was given rather than the file it reaches reads the secret
 * (Claude Code CVE-2026-25724). Landlock checks the inode the open
 * reaches, whatever path led there: EACCES. */
#include "probe.h"

int main(void) {
  const char* dir = probe_env("OARBANK_PROBE_WRITABLE");
  const char* secret = probe_env("OARBANK_PROBE_SECRET");
  char link[4096];
  snprintf(link, sizeof link, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  if (symlink(secret, link) != 0) probe_error("symlink %s -> %s: %s", link, secret, strerror(errno));
  int fd = open(link, O_RDONLY | O_CLOEXEC);
  int err = errno;
  unlink(link);
  if (fd < 0) blocked(err, "open %s (a link to %s)", link, secret);
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) blocked(errno, "read through %s", link);
  escaped("read %zd bytes of %s through a link in the writable grant", n, secret);
}
