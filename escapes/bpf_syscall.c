/* bpf(): eBPF programs and maps are kernel attack surface. A NULL attr makes
 * an unfiltered call fail with EFAULT (or EPERM first where unprivileged bpf
 * is disabled: the harness proves the escape as root). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 64);
  verdict_reached_kernel("bpf(BPF_MAP_CREATE, NULL)", ret, errno, EPERM);
}
