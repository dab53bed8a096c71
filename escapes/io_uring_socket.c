/* IORING_OP_SOCKET (5.19+) makes a socket inside the kernel: no socket()
 * syscall for the filter to refuse. Asks for AF_UNIX SOCK_STREAM, the socket
 * the no-broker rule refuses. What stops it: seccomp refuses io_uring_setup
 * under every policy (EPERM), so the ring never exists. */
#include <sys/socket.h>

#include "probe.h"

#include "io_uring_ring.h"

int main(void) {
  struct ring r;
  ring_setup(&r);
  struct io_uring_sqe sqe;
  memset(&sqe, 0, sizeof sqe);
  sqe.opcode = IORING_OP_SOCKET;
  sqe.fd = AF_UNIX;         /* domain */
  sqe.off = SOCK_STREAM;    /* type */
  sqe.len = 0;              /* protocol */
  int res = ring_run(&r, &sqe);
  if (res >= 0) escaped("IORING_OP_SOCKET made an AF_UNIX socket, fd %d", res);
  /* The ring works: that alone is past the filter, whatever the op said. */
  escaped("io_uring reached the kernel; IORING_OP_SOCKET answered %s", probe_errno_name(-res));
}
