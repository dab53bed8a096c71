/* A deny-list lets through every syscall a kernel newer than its table
 * adds. The filter answers ENOSYS to every number above the highest its
 * build's syscall table knows ($OARBANK_PROBE_SYSCALL_TABLE_END, from the
 * agent's sandbox-report), as a kernel without the call would. The harness
 * lists the numbers above that which this kernel has
 * ($OARBANK_PROBE_SYSCALLS_ABOVE_TABLE); each is called with every argument
 * -1, which fails before doing anything: any answer but ENOSYS reached the
 * kernel. Where this kernel has none, the route does not exist here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

int main(void) {
  const long end = probe_env_long("OARBANK_PROBE_SYSCALL_TABLE_END");
  const char *list = getenv("OARBANK_PROBE_SYSCALLS_ABOVE_TABLE");
  if (list == NULL || *list == '\0')
    unsupported("this kernel has no syscall above the table's %ld (of the next 64)", end);
  char numbers[1024];
  snprintf(numbers, sizeof numbers, "%s", list);
  long last = -1;
  for (char *save = NULL, *tok = strtok_r(numbers, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    const long nr = strtol(tok, NULL, 10);
    if (nr <= end) probe_error("syscall %ld is not above the table's %ld", nr, end);
    const long ret = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
    if (ret != -1 || errno != ENOSYS)
      escaped("syscall %ld, above the table's %ld, reached the kernel: %s", nr, end,
                    ret == -1 ? probe_errno_name(errno) : "success");
    last = nr;
  }
  blocked(ENOSYS, "every syscall above the table's %ld answered ENOSYS (up to %ld)", end, last);
}
