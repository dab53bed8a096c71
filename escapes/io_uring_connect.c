/* IORING_OP_CONNECT: a TCP connection to 127.0.0.1:OARBANK_PROBE_TCP_PORT
 * made by the ring (its socket from IORING_OP_SOCKET), so neither socket()
 * nor connect() passes the filter. Landlock still checks a ring's connect
 * (EACCES), but the ring is already past seccomp. What stops it: seccomp
 * refuses io_uring_setup under every policy (EPERM). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

#include "io_uring_ring.h"

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct ring r;
  ring_setup(&r);
  struct io_uring_sqe sqe;
  memset(&sqe, 0, sizeof sqe);
  sqe.opcode = IORING_OP_SOCKET;
  sqe.fd = AF_INET;
  sqe.off = SOCK_STREAM;
  int sock = ring_run(&r, &sqe);
  if (sock < 0) escaped("io_uring reached the kernel; IORING_OP_SOCKET(AF_INET) answered %s", probe_errno_name(-sock));
  static struct sockaddr_in sa;
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memset(&sqe, 0, sizeof sqe);
  sqe.opcode = IORING_OP_CONNECT;
  sqe.fd = sock;
  sqe.addr = (unsigned long)&sa;
  sqe.off = sizeof sa; /* addrlen */
  int res = ring_run(&r, &sqe);
  if (res == 0) {
    (void)!write(sock, PROBE_NAME "\n", sizeof PROBE_NAME);
    escaped("IORING_OP_CONNECT connected to 127.0.0.1:%ld", port);
  }
  escaped("io_uring reached the kernel (socket fd %d); IORING_OP_CONNECT answered %s", sock, probe_errno_name(-res));
}
