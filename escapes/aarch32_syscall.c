/* The AArch32 syscall table of an arm64 kernel (CONFIG_COMPAT): arm64's
 * counterpart of int80_getuid. An AArch64 process cannot make an AArch32
 * call itself, so the probe execs a 32-bit ARM program (helpers/
 * aarch32_getuid, built with gcc-arm-linux-gnueabihf) that calls getuid32
 * (199 in the AArch32 table) and prints this probe's verdict line: the
 * route itself is the escape, since a filter comparing AArch64 numbers
 * reads every AArch32 call as some other syscall (AArch64 199 is
 * socketpair). What stops it: the filter's bad-arch action kills the
 * program at its first call (SIGSYS, no verdict line). A kernel without
 * CONFIG_COMPAT, or a CPU without AArch32 at EL0 (many recent arm64 cores),
 * refuses the exec with ENOEXEC: the route does not exist there. */
#include <unistd.h>

#include "probe.h"

int main(void) {
#if defined(__aarch64__)
  char path[4096];
  snprintf(path, sizeof path, "%s/helpers/aarch32_getuid", probe_env("OARBANK_PROBE_BUNDLE"));
  if (access(path, X_OK) != 0) unsupported("no AArch32 program at %s (the build had no arm-linux-gnueabihf-gcc)", path);
  fflush(stdout);
  char *argv[] = {path, NULL};
  execve(path, argv, environ);
  if (errno == ENOEXEC) unsupported("this kernel or CPU runs no AArch32 programs (execve: ENOEXEC)");
  probe_error("execve %s: %s", path, strerror(errno));
#else
  unsupported("AArch32 is the compat entry of arm64 kernels: this architecture has none (int80_getuid is x86-64's)");
#endif
}
