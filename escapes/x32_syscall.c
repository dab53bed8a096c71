/* The x32 syscall table: the x86_64 `syscall` instruction with bit 30
 * (__X32_SYSCALL_BIT) set in the number. seccomp reports x32 calls with the
 * x86_64 audit arch, so a filter that checks only the arch and then compares
 * numbers never matches socket = 41 | 0x40000000. Tries socket(AF_UNIX,
 * SOCK_STREAM), which the no-broker rule refuses. What stops it: libseccomp's
 * x86_64 filter sends numbers >= 0x40000000 to the bad-arch action, which
 * kills the process (SIGSYS, no verdict line). A kernel without
 * CONFIG_X86_X32_ABI (Debian's cloud kernels, the kernel matrix's guests),
 * or one whose x32 table is compiled in but off (syscall.x32=n), answers
 * ENOSYS: the route does not exist there. */
#include <sys/socket.h>

#include "probe.h"

#define X32_SYSCALL_BIT 0x40000000L
#define X32_NR_SOCKET 41

int main(void) {
#if !defined(__x86_64__)
  unsupported("x32 is an ABI of x86-64 kernels: this architecture has none");
#else
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(X32_SYSCALL_BIT | X32_NR_SOCKET), "D"((long)AF_UNIX), "S"((long)SOCK_STREAM), "d"(0L)
                   : "rcx", "r11", "memory");
  if (ret >= 0) escaped("x32 socket(AF_UNIX, SOCK_STREAM) made fd %ld", ret);
  if (ret == -ENOSYS) unsupported("x32 socket answered ENOSYS: no x32 syscalls on this kernel (CONFIG_X86_X32_ABI, syscall.x32=)");
  if (ret == -EPERM) blocked(EPERM, "x32 socket refused");
  escaped("x32 socket reached the kernel: %s", probe_errno_name((int)-ret));
#endif
}
