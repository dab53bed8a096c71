/* Writing an extended attribute on a file outside every grant: up to 64 KiB
 * of data per user.* attribute, on a file the cage never let the module open.
 * setxattr(2) takes the file's own write permission and no open, and
 * Landlock has no hook on it. What stops it: everything outside the writable
 * grants is read-only in the cage's mount namespace (EROFS).
 *
 * The target is the run's victim file (owned by the probe's uid, mode 0666).
 * An attribute set is removed at once. A filesystem without user.*
 * attributes (tmpfs before Linux 6.6) cannot show the escape: unsupported. */
#include <sys/stat.h>
#include <sys/xattr.h>

#include "probe.h"

int main(void) {
  struct stat st;
  const char *victim = probe_own_victim(&st);
  static const char kName[] = "user.oarbank_probe";
  if (setxattr(victim, kName, "1", 1, 0) == 0) {
    removexattr(victim, kName);
    escaped("setxattr(%s, %s) succeeded", victim, kName);
  }
  if (errno == EOPNOTSUPP) unsupported("%s: no user.* extended attributes on this filesystem", victim);
  blocked(errno, "setxattr %s", victim);
}
