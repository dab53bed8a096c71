/* The io_uring calls besides setup: io_uring_enter submits a ring's work
 * and io_uring_register changes what a ring may reach; a descriptor of a
 * ring made elsewhere (passed over a socket) would need only these. The
 * seccomp filter refuses both (EPERM) as well as io_uring_setup; with a bad
 * descriptor an unfiltered call answers EBADF. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  const struct probe_call calls[] = {
      probe_call("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)),
      probe_call("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0)),
  };
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EPERM);
}
