/* Changing the owner or group of a file outside every grant. Without
 * CAP_CHOWN an owner may still give a file to one of its own groups, and
 * every chown clears the setuid and setgid bits; Landlock has no hook on
 * chown. What stops it: everything outside the writable grants is read-only
 * in the cage's mount namespace (EROFS).
 *
 * The target is the run's victim file (owned by the probe's uid), given the
 * owner and group it has: the same checks as a real change, nothing changed
 * even if the cage failed. */
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  struct stat st;
  const char *victim = probe_own_victim(&st);
  if (chown(victim, st.st_uid, st.st_gid) == 0) escaped("chown(%s, %u, %u) succeeded", victim, st.st_uid, st.st_gid);
  blocked(errno, "chown %s", victim);
}
