/* A seccomp user-notification listener inside the sandbox: a supervisor the
 * module controls that answers syscalls for its children (and the TOCTOU
 * class of bugs around it). The cage's filter refuses
 * seccomp(SET_MODE_FILTER, FLAG_NEW_LISTENER) with EPERM. A NULL program makes
 * an unfiltered call fail with EFAULT before anything is installed. */
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, NULL);
  verdict_reached_kernel("seccomp(SET_MODE_FILTER, NEW_LISTENER, NULL)", ret, errno, EPERM);
}
