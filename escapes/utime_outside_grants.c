/* Setting the times of a file outside every grant: backdating what was
 * changed, or making make(1) and backup tools skip a file. An owner may set
 * any time; Landlock has no hook on utimensat. What stops it: everything
 * outside the writable grants is read-only in the cage's mount namespace
 * (EROFS).
 *
 * The target is the run's victim file (owned by the probe's uid), given the
 * access and modification times it has (two explicit times take the owner
 * check; UTIME_OMIT for both would return before any check). */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  struct stat st;
  const char *victim = probe_own_victim(&st);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (utimensat(AT_FDCWD, victim, times, 0) == 0) escaped("utimensat(%s) set its times", victim);
  blocked(errno, "utimensat %s", victim);
}
