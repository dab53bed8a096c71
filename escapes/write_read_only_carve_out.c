/* Writing inside a read-only carve-out of a writable grant (a worktree's
 * .git): Landlock rules only add rights, so the grant's rule reaches the
 * carve-out too; what refuses the write is the carve-out's read-only bind in
 * the launch's mount namespace (EROFS). Under a policy with no read_only
 * the directory is part of the writable grant and the write succeeds (a
 * positive control).
 *
 * The target is <grant>/carved/victim (the grant is the directory of this
 * run's writable subdirectory; the battery's read_only policies name
 * @ROOT@/work/carved), mode 0666 in a 0777 directory, so file permissions
 * cannot refuse; nothing is written (a zero-length write after an O_APPEND
 * open), so an escape changes nothing either. */
#include <fcntl.h>
#include <libgen.h>

#include "probe.h"

int main(void) {
  char writable[4096], victim[4096];
  snprintf(writable, sizeof writable, "%s", probe_env("OARBANK_PROBE_WRITABLE"));
  snprintf(victim, sizeof victim, "%s/carved/victim", dirname(writable));
  int fd = open(victim, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s for writing", victim);
  if (write(fd, "", 0) != 0) blocked(errno, "write %s", victim);
  escaped("opened %s for writing", victim);
}
