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
  const char *dir = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char victim[4096];
  snprintf(victim, sizeof victim, "%s/%s.victim", dir, PROBE_NAME);
  struct stat st;
  if (stat(victim, &st) != 0) probe_error("stat %s: %s", victim, strerror(errno));
  if (st.st_uid != geteuid()) probe_error("%s is owned by uid %u, not this uid %u", victim, st.st_uid, geteuid());
  if (chown(victim, st.st_uid, st.st_gid) == 0) escaped("chown(%s, %u, %u) succeeded", victim, st.st_uid, st.st_gid);
  blocked(errno, "chown %s", victim);
}
