/* The kernel runs uprobe and uretprobe (x86_64, Linux 6.16 and 6.11)
 * without consulting seccomp: they return from a probe's trampoline, and
 * called from anywhere else uprobe answers ENXIO and uretprobe raises
 * SIGILL, doing nothing more. No filter can refuse them (the kernel exempts
 * them by design), so every policy expects them to reach the kernel and stay
 * harmless: a positive control, never counted as a hole. A kernel without
 * either has no such route. */
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include "probe.h"

#if defined(__x86_64__)
static sigjmp_buf back;
static void on_sigill(int sig) {
  (void)sig;
  siglongjmp(back, 1);
}
#endif

int main(void) {
#if defined(__x86_64__)
  const long uprobe_nr = 336, uretprobe_nr = 335;
  const long ret = syscall(uprobe_nr, 0L, 0L, 0L, 0L, 0L, 0L);
  const int uprobe_err = ret == -1 ? errno : 0;
  if (uprobe_err == ENXIO) escaped("uprobe reached the kernel: ENXIO (it acts only in a uprobe trampoline)");
  struct sigaction sa = {0};
  sa.sa_handler = on_sigill;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGILL, &sa, NULL) != 0) probe_error("sigaction(SIGILL): %s", probe_errno_name(errno));
  if (sigsetjmp(back, 1) != 0) escaped("uretprobe reached the kernel: SIGILL (it acts only in a uretprobe trampoline)");
  const long rret = syscall(uretprobe_nr, 0L, 0L, 0L, 0L, 0L, 0L);
  const int uretprobe_err = rret == -1 ? errno : 0;
  if (uprobe_err == ENOSYS && uretprobe_err == ENOSYS)
    unsupported("this kernel has neither uprobe nor uretprobe (Linux 6.16, 6.11)");
  probe_error("uprobe answered %s, uretprobe %s", probe_errno_name(uprobe_err), probe_errno_name(uretprobe_err));
#else
  unsupported("uprobe and uretprobe are x86_64 syscalls");
#endif
}
