/* The i386 syscall table through `int 0x80` from a 64-bit process: a filter
 * written for x86_64 numbers does not see socketcall(SYS_SOCKET, AF_UNIX).
 * The cage's bad-arch action kills the process (SIGSYS): no verdict line.
 * Kernels without an i386 entry (or hypervisors that fault it) make the
 * instruction raise SIGSEGV: the route does not exist there. */
#include <signal.h>

#include "probe.h"

static void on_segv(int sig) {
  (void)sig;
  unsupported("int 0x80 faults on this kernel: no i386 syscall entry");
}

int main(void) {
  /* socketcall(1 = SYS_SOCKET, args): the kernel reads {AF_UNIX,
   * SOCK_STREAM, 0} through a 32-bit pointer. Static binaries are not PIE,
   * so .data sits below 4 GiB. */
  static unsigned int args[3] = {1 /* AF_UNIX */, 1 /* SOCK_STREAM */, 0};
  if ((unsigned long)args > 0xffffffffUL) probe_error("args above 4 GiB; build without PIE");
#if defined(__x86_64__)
  signal(SIGSEGV, on_segv);
  long ret;
  /* int 0x80 from 64-bit code zeroes r8-r11. */
  __asm__ volatile("int $0x80"
                   : "=a"(ret)
                   : "a"(102 /* __NR_socketcall (i386) */), "b"(1), "c"(args)
                   : "memory", "r8", "r9", "r10", "r11");
  if (ret >= 0) escaped("int 0x80 socketcall(AF_UNIX, SOCK_STREAM) made fd %ld", ret);
  blocked((int)-ret, "int 0x80 socketcall answered");
#else
  (void)on_segv;
  unsupported("int 0x80 is the i386 entry of x86-64 kernels: this architecture has none");
#endif
}
