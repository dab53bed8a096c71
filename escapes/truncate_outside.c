/* Truncating a file outside every grant: destroying a user's data needs no
 * read and no write(2), only truncate(2) or open(O_TRUNC). The cage's
 * read-only mounts refuse both outside the writable grants (EROFS), and
 * behind them Landlock (ABI 3+, LANDLOCK_ACCESS_FS_TRUNCATE) with EACCES.
 *
 * The target must be a file the probe's uid could truncate but for the cage,
 * or the DAC answers first and proves nothing. In order:
 *   1. $OUTSIDE_DIR/truncate_outside.victim, if it exists and its owner and
 *      mode (stat(2), which the cage does not mediate) let this uid write it;
 *   2. that file created with mode 0666: this works only unconfined (the
 *      harness's unconfined root run leaves it for the confined runs of the
 *      same world, so uid 65534 has a target too);
 *   3. the secret (0644, owned by root): the DAC lets root write it, so for
 *      root only the cage can refuse. For another uid with no victim file the
 *      DAC refuses too (EACCES as well); the detail says so.
 * Nothing is lost even if the cage failed: truncate(2) cuts the file to its
 * current length (stat(2) is not mediated), which takes the same permission
 * checks as any length; open(O_TRUNC) is tried on the victim file only. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  char victim[4096];
  snprintf(victim, sizeof victim, "%s/%s.victim", dir, PROBE_NAME);

  const char *target = NULL;
  const char *how = NULL;
  if (probe_dac_allows(victim, W_OK)) {
    target = victim;
    how = "existing victim file";
  } else {
    int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fchmod(fd, 0666); /* past the umask: later runs as another uid use it too */
      write(fd, "victim\n", 7);
      close(fd);
      target = victim;
      how = "victim file created by this run";
    } else if (probe_dac_allows(secret, W_OK)) {
      target = secret;
      how = "the secret (file permissions let this uid write it; only the cage can refuse)";
    } else {
      target = secret;
      how = "the secret (no victim file and the DAC refuses this uid too: not proof of the cage)";
    }
  }

  struct stat st;
  if (stat(target, &st) != 0) probe_error("stat %s: %s", target, strerror(errno));
  if (truncate(target, st.st_size) == 0) escaped("truncate(%s, %lld) succeeded [%s]", target, (long long)st.st_size, how);
  int err = errno;
  if (target == victim) {
    int fd = open(victim, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0) {
      write(fd, "victim\n", 7);
      close(fd);
      escaped("open(%s, O_TRUNC) succeeded after truncate(2) answered %s [%s]", victim, probe_errno_name(err), how);
    }
  }
  blocked(err, "truncate %s [%s]", target, how);
}
