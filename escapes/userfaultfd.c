/* userfaultfd lets a process stall the kernel on a page fault in its memory,
 * widening race windows in kernel exploits. The seccomp filter refuses the
 * syscall with EPERM; the same object is reachable through /dev/userfaultfd
 * (USERFAULTFD_IOC_NEW), which Landlock does not grant (EACCES). Escaped if
 * either route yields a userfaultfd. */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  int err = errno;
  if (fd >= 0) escaped("userfaultfd() made fd %ld", fd);
  /* vm.unprivileged_userfaultfd = 0 (the default) refuses a process without
   * CAP_SYS_PTRACE, but not one that asks for user-mode faults only (5.11). */
  fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | 1 /* UFFD_USER_MODE_ONLY */);
  if (fd >= 0) escaped("userfaultfd(UFFD_USER_MODE_ONLY) made fd %ld (without it: %s)", fd, probe_errno_name(err));
  char dev[96] = "absent";
  int dfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dfd >= 0) {
#ifdef USERFAULTFD_IOC_NEW
    long ufd = ioctl(dfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
#else
    long ufd = ioctl(dfd, _IO(0xAA, 0x00), O_CLOEXEC | O_NONBLOCK);
#endif
    if (ufd >= 0) escaped("/dev/userfaultfd USERFAULTFD_IOC_NEW made fd %ld (the syscall answered %s)", ufd,
                          probe_errno_name(err));
    snprintf(dev, sizeof dev, "opened, ioctl answered %s", probe_errno_name(errno));
  } else if (errno != ENOENT) {
    snprintf(dev, sizeof dev, "open answered %s", probe_errno_name(errno));
  }
  if (err == ENOSYS && strcmp(dev, "absent") == 0) unsupported("kernel built without userfaultfd (ENOSYS)");
  blocked(err, "userfaultfd(); /dev/userfaultfd: %s", dev);
}
