/* Making a device node in a writable grant: a character or block node
 * opens whatever device its numbers name (/dev/mem, a disk), whatever the
 * policy grants under /dev. Three things stand in the way, each enough on
 * its own: Landlock, which gives the writable grants every right to make
 * files but MAKE_CHAR and MAKE_BLOCK (EACCES, checked first); the dropped
 * CAP_MKNOD (EPERM); and the grants' nodev binds, which would keep such a
 * node from opening. Unconfined as root the node is made: escaped.
 *
 * The nodes carry /dev/null's numbers (1,3) and loop0's (7,0) and are
 * removed at once: nothing is reached even if the cage failed. */
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "probe.h"

int main(void) {
  const char *dir = probe_env("OARBANK_PROBE_WRITABLE");
  static const struct {
    const char *what;
    mode_t type;
    unsigned major, minor;
  } nodes[] = {
      {"char 1:3", S_IFCHR, 1, 3},
      {"block 7:0", S_IFBLK, 7, 0},
  };
  char seen[128] = "";
  int first_err = 0;
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d.%zu", dir, PROBE_NAME, (int)getpid(), i);
    int rc = mknod(path, nodes[i].type | 0600, makedev(nodes[i].major, nodes[i].minor));
    int err = errno;
    if (rc == 0) {
      unlink(path);
      escaped("mknod(%s, %s) made a device node in a writable grant", path, nodes[i].what);
    }
    size_t len = strlen(seen);
    snprintf(seen + len, sizeof seen - len, "%s%s=%s", len ? " " : "", nodes[i].what, probe_errno_name(err));
    if (first_err == 0) first_err = err;
  }
  blocked(first_err, "%s", seen);
}
