/* Hard-linking a file from outside every grant into a writable grant: the
 * new name would carry the grant's rights (read, write, maybe execute) to an
 * inode the cage keeps out of reach. Landlock (ABI 2+) refuses the
 * reparenting with EXDEV because no rule outside the grants gives REFER;
 * the writable grant is its own bind mount in the cage, so the VFS refuses a
 * link across mounts with EXDEV before Landlock is asked.
 *
 * With fs.protected_hardlinks=1 a uid that neither owns the source nor may
 * read and write it gets EPERM from the DAC before Landlock, which proves
 * nothing. So the source is, in order: $OUTSIDE_DIR/hardlink_across_grants.victim
 * if this uid may read and write it, that file created 0666 (works only
 * unconfined; the harness's unconfined root run leaves it for the confined
 * runs), else the secret (root owns it: only the cage refuses root).
 * The source and the writable grant must be on one filesystem, or the
 * unconfined run answers EXDEV too. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  char victim[4096], link_path[4096];
  snprintf(victim, sizeof victim, "%s/%s.victim", dir, PROBE_NAME);
  snprintf(link_path, sizeof link_path, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());

  const char *source = secret;
  const char *how = "the secret";
  if (probe_dac_allows(victim, R_OK | W_OK)) {
    source = victim;
    how = "existing victim file";
  } else {
    int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fchmod(fd, 0666);
      write(fd, "victim\n", 7);
      close(fd);
      source = victim;
      how = "victim file created by this run";
    } else if (!probe_dac_allows(secret, R_OK | W_OK)) {
      how = "the secret (no victim file; protected_hardlinks may refuse this uid first)";
    }
  }

  if (link(source, link_path) != 0) blocked(errno, "link %s -> %s [%s]", source, link_path, how);
  int fd = open(link_path, O_RDONLY | O_CLOEXEC);
  char buf[64];
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
  if (fd >= 0) close(fd);
  unlink(link_path);
  escaped("linked %s to %s [%s]; read through the link: %zd bytes", source, link_path, how, n);
}
