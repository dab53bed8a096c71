/* Replacing a read-only carve-out (a worktree's .git) with a directory of
 * the module's own, which the user's tools would then trust: here with
 * renameat2(RENAME_EXCHANGE), a rename away and a new directory over it in
 * one step. The carve-out is a mount point in the launch's mount namespace,
 * and no process may rename or replace a mount point there (EBUSY),
 * capability or not. Under a policy with no read_only the directory is part
 * of the writable grant and the exchange succeeds (a positive control); it
 * is exchanged back at once. The twin holds a victim file as the carved
 * directory does, so a probe that runs at the same moment finds one either
 * way.
 *
 * The carved directory is <grant>/carved (the grant is the directory of
 * this run's writable subdirectory); the twin is in this run's own. */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "probe.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int exchange(const char *a, const char *b) {
  return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}

int main(void) {
  char writable[4096], grant[4096], carved[4200], twin[4200], victim[4300];
  snprintf(writable, sizeof writable, "%s", probe_env("OARBANK_PROBE_WRITABLE"));
  snprintf(grant, sizeof grant, "%s", writable);
  snprintf(carved, sizeof carved, "%s/carved", dirname(grant));
  snprintf(twin, sizeof twin, "%s/%s.twin", writable, PROBE_NAME);
  snprintf(victim, sizeof victim, "%s/victim", twin);
  if (mkdir(twin, 0777) != 0 && errno != EEXIST) blocked(errno, "mkdir %s (setup)", twin);
  chmod(twin, 0777);
  int fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd >= 0) {
    fchmod(fd, 0666);
    close(fd);
  }
  if (exchange(carved, twin) != 0)
    blocked(errno, "renameat2(%s, %s, RENAME_EXCHANGE)", carved, twin);
  const int back = exchange(carved, twin);
  escaped("exchanged %s with %s%s", carved, twin, back == 0 ? " (and back)" : " (and could not exchange it back)");
}
