/* Every call that reads extended attributes by path: getxattr, lgetxattr,
 * getxattrat and the three listxattr calls. Attributes are data (user.*
 * values of up to 64 KiB) and Landlock has no hook on reading them, so the
 * seccomp filter answers each by path with EOPNOTSUPP ("no attributes
 * here"), a row of its own each; fgetxattr on a file the job could open
 * stays. Here each asks the bundle, which every policy grants: an
 * unfiltered call answers ENODATA, a size, or ENOSYS on a kernel before
 * the *xattrat calls (6.13). */
#include <sys/syscall.h>
#include <sys/xattr.h>

#include "probe.h"

#define PROBE_SYS_GETXATTRAT 464 /* x86-64 and the generic table alike */
#define PROBE_SYS_LISTXATTRAT 465

int main(void) {
  const char *bundle = probe_env("OARBANK_PROBE_BUNDLE");
  char buf[256];
  struct {
    unsigned long long value;
    unsigned size, flags;
  } args = {(unsigned long long)(unsigned long)buf, sizeof buf, 0};
  const struct probe_call calls[] = {
      probe_call("getxattr", getxattr(bundle, "user.oarbank", buf, sizeof buf)),
      probe_call("lgetxattr", lgetxattr(bundle, "user.oarbank", buf, sizeof buf)),
      probe_call("getxattrat", syscall(PROBE_SYS_GETXATTRAT, AT_FDCWD, bundle, 0, "user.oarbank", &args, sizeof args)),
      probe_call("listxattr", listxattr(bundle, buf, sizeof buf)),
      probe_call("llistxattr", llistxattr(bundle, buf, sizeof buf)),
      probe_call("listxattrat", syscall(PROBE_SYS_LISTXATTRAT, AT_FDCWD, bundle, 0, buf, sizeof buf)),
  };
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EOPNOTSUPP);
}
