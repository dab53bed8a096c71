/* Changing the mode of a file outside every grant: chmod 0644 on a private
 * key makes it readable by every local user, chmod u+s on a file root owns
 * makes a setuid-root program. Landlock has no right for a file's metadata
 * (no hook on chmod, chown, utimes or xattrs), and the owner needs no
 * capability, so with Landlock alone both work. What stops it: everything
 * outside the writable grants is read-only in the cage's mount namespace
 * (EROFS).
 *
 * The target is the run's victim file, $OUTSIDE_DIR/chmod_outside_grants.victim,
 * owned by the probe's uid, so file permissions cannot refuse. The mode is set
 * to the one it has (stat(2) is not mediated): the same checks as any mode,
 * nothing changed even if the cage failed. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char victim[4096];
  snprintf(victim, sizeof victim, "%s/%s.victim", dir, PROBE_NAME);
  struct stat st;
  if (stat(victim, &st) != 0) probe_error("stat %s: %s", victim, strerror(errno));
  if (st.st_uid != geteuid()) probe_error("%s is owned by uid %u, not this uid %u", victim, st.st_uid, geteuid());
  if (chmod(victim, st.st_mode & 07777) == 0) escaped("chmod(%s, 0%o) succeeded", victim, st.st_mode & 07777);
  blocked(errno, "chmod %s", victim);
}
