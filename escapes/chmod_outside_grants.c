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
  struct stat st;
  const char *victim = probe_own_victim(&st);
  if (chmod(victim, st.st_mode & 07777) == 0) escaped("chmod(%s, 0%o) succeeded", victim, st.st_mode & 07777);
  blocked(errno, "chmod %s", victim);
}
