/* Dumping core. A crashing module with a core limit writes its memory into
 * a writable grant as a core file (as large as the process: a disk filled
 * from inside the cage), or hands it to the host's core_pattern helper.
 * The launcher sets RLIMIT_CORE to 0, soft and hard; raising the hard
 * limit needs CAP_SYS_RESOURCE, which the cage drops (EPERM).
 *
 * Escaped if the soft limit is above 0 now, or can be raised: up to the
 * hard limit, or past it. Unconfined, Debian's default (soft 0, hard
 * unlimited) lets any process raise it, and root may raise the hard limit
 * too. Nothing crashes and no core is written: the probe only sets the
 * limit it already has, or a larger one, and exits. */
#include <sys/resource.h>

#include "probe.h"

int main(void) {
  struct rlimit now;
  if (getrlimit(RLIMIT_CORE, &now) != 0) probe_error("getrlimit(RLIMIT_CORE): %s", strerror(errno));
  if (now.rlim_cur != 0) escaped("RLIMIT_CORE is %llu: a crash dumps core", (unsigned long long)now.rlim_cur);
  if (now.rlim_max != 0) {
    struct rlimit up = {now.rlim_max, now.rlim_max};
    if (setrlimit(RLIMIT_CORE, &up) == 0)
      escaped("RLIMIT_CORE raised from 0 to its hard limit %llu: a crash dumps core", (unsigned long long)now.rlim_max);
  }
  struct rlimit past = {1 << 20, 1 << 20};
  if (setrlimit(RLIMIT_CORE, &past) == 0) escaped("RLIMIT_CORE raised past its hard limit %llu to 1 MiB", (unsigned long long)now.rlim_max);
  blocked(errno, "setrlimit(RLIMIT_CORE, 1 MiB) with soft and hard limits %llu/%llu", (unsigned long long)now.rlim_cur,
          (unsigned long long)now.rlim_max);
}
