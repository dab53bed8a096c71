/* The i386 syscall table through `int 0x80` from a 64-bit process, with the
 * plainest call there is, getuid32 (199 on i386): the route itself is the
 * escape, since a filter comparing x86_64 numbers reads every i386 call as
 * some other syscall (x86_64 199 is fremovexattr) and applies the wrong
 * rule. What stops it: the filter's bad-arch action kills the process
 * (SIGSYS, no verdict line). Kernels without an i386 entry (or hypervisors
 * that fault it) make the instruction raise SIGSEGV: the route does not
 * exist there. */
#include <signal.h>

#include "probe.h"

static void on_segv(int sig) {
  (void)sig;
  unsupported("int 0x80 faults on this kernel: no i386 syscall entry");
}

int main(void) {
#if defined(__x86_64__)
  signal(SIGSEGV, on_segv);
  long ret;
  __asm__ volatile("int $0x80"
                   : "=a"(ret)
                   : "a"(199 /* __NR_getuid32 (i386) */)
                   : "memory", "r8", "r9", "r10", "r11");
  if (ret >= 0) escaped("int 0x80 getuid32 answered uid %ld", ret);
  escaped("int 0x80 getuid32 reached the kernel: %s", probe_errno_name((int)-ret));
#else
  (void)on_segv;
  unsupported("int 0x80 is the i386 entry of x86-64 kernels: this architecture has none");
#endif
}
