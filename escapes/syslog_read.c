/* Reading the kernel log (addresses that defeat KASLR, other tenants'
 * messages). The seccomp filter refuses syslog(2) with EPERM; /dev/kmsg is
 * not granted (dev_beyond_granted), and /proc/kmsg, inside the base system's
 * /proc, needs CAP_SYSLOG, which the cage drops. Root unconfined reads the
 * log with SYSLOG_ACTION_READ_ALL (non-destructive). */
#include <fcntl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  static char buf[4096];
  long n = syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, (int)sizeof buf);
  int err = errno;
  if (n >= 0) escaped("syslog(READ_ALL) read %ld bytes of the kernel log", n);
  /* Open only: reading /proc/kmsg would consume messages. */
  int fd = open("/proc/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) escaped("opened /proc/kmsg (syslog(2) answered %s)", probe_errno_name(err));
  int kmsg_err = errno;
  blocked(err, "syslog(READ_ALL); /proc/kmsg answered %s", probe_errno_name(kmsg_err));
}
