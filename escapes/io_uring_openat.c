/* IORING_OP_OPENAT: open OARBANK_PROBE_SECRET (outside every grant) through
 * the ring, so no openat() passes the filter. Landlock still checks a ring's
 * open (its credentials carry the domain), but a working ring is past
 * seccomp whatever the op answers, so any completion counts as escaped (the
 * detail says whether Landlock still held). What stops it: seccomp refuses
 * io_uring_setup under every policy (EPERM). */
#include <fcntl.h>

#include "probe.h"

#include "io_uring_ring.h"

int main(void) {
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  struct ring r;
  ring_setup(&r);
  struct io_uring_sqe sqe;
  memset(&sqe, 0, sizeof sqe);
  sqe.opcode = IORING_OP_OPENAT;
  sqe.fd = AT_FDCWD;
  sqe.addr = (unsigned long)secret;
  sqe.len = 0; /* mode */
  sqe.open_flags = O_RDONLY | O_CLOEXEC;
  int fd = ring_run(&r, &sqe);
  if (fd < 0) escaped("io_uring reached the kernel; IORING_OP_OPENAT %s answered %s", secret, probe_errno_name(-fd));
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  escaped("IORING_OP_OPENAT opened %s, read %zd bytes", secret, n);
}
