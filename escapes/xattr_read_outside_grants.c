/* Reading an extended attribute of a file outside every grant: user.*
 * attributes are data (up to 64 KiB each, set by whoever may write the
 * file; browsers record where a download came from), and getxattr(2) needs
 * no open and passes no Landlock hook. The harness puts one on the secret.
 * What stops it: seccomp answers getxattr, lgetxattr, getxattrat and the
 * list calls by path with EOPNOTSUPP (fgetxattr on a file the cage lets the
 * module open stays).
 *
 * A filesystem without user.* attributes (tmpfs before Linux 6.6) cannot
 * show the escape: the probe asks the bundle's directory, on the same
 * filesystem, through fgetxattr, which the cage allows, and says
 * unsupported. */
#include <fcntl.h>
#include <sys/xattr.h>

#include "probe.h"

int main(void) {
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  const char *bundle = probe_env("OARBANK_PROBE_BUNDLE");
  static const char kName[] = "user.oarbank_secret";
  int dir = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) probe_error("open %s: %s", bundle, strerror(errno));
  if (fgetxattr(dir, kName, NULL, 0) < 0 && errno == EOPNOTSUPP)
    unsupported("%s: no user.* extended attributes on this filesystem", bundle);
  close(dir);
  char value[256];
  ssize_t n = getxattr(secret, kName, value, sizeof value - 1);
  if (n >= 0) {
    value[n] = '\0';
    escaped("getxattr(%s, %s) read %zd bytes: %s", secret, kName, n, value);
  }
  blocked(errno, "getxattr %s %s", secret, kName);
}
