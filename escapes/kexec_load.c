/* Replacing the running kernel. The seccomp filter refuses kexec_load and
 * kexec_file_load with EPERM. Unconfined as root, kexec_load with too many
 * segments answers EINVAL and kexec_file_load(-1) EBADF after the capability
 * check (or EPERM when kexec is disabled or the kernel locked down). A
 * kernel built without kexec answers ENOSYS to both: unsupported. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long r_l = syscall(SYS_kexec_load, 0UL, 0xffffUL, NULL, 0UL);
  int e_l = errno;
  long r_f = syscall(SYS_kexec_file_load, -1, -1, 0UL, "", 0UL);
  int e_f = errno;
  char seen[160];
  snprintf(seen, sizeof seen, "kexec_load(65535 segments)=%s kexec_file_load(-1)=%s",
           r_l >= 0 ? "ok" : probe_errno_name(e_l), r_f >= 0 ? "ok" : probe_errno_name(e_f));
  if (r_l < 0 && e_l == EPERM && r_f < 0 && e_f == EPERM) blocked(EPERM, "%s", seen);
  if (r_l < 0 && e_l == ENOSYS && r_f < 0 && e_f == ENOSYS)
    unsupported("kernel built without kexec (CONFIG_KEXEC=n, CONFIG_KEXEC_FILE=n): %s", seen);
  escaped("kexec reached the kernel: %s", seen);
}
