/* TCP Fast Open: sendto, sendmsg or sendmmsg with MSG_FASTOPEN on an
 * unconnected TCP socket connects and sends in one call, without connect(),
 * so a check hooked on connect() alone does not see it. Each of the three
 * calls is tried on a fresh socket. Target: 127.0.0.1:OARBANK_PROBE_TCP_PORT.
 * What stops it: under net none seccomp refuses socket(AF_INET) (EPERM);
 * under egress-allowlist the port must be refused all the same, by
 * Landlock's TCP connect rule (EACCES) if it covers the Fast Open path, else
 * by seccomp on MSG_FASTOPEN, one row per call (EPERM). ECONNREFUSED is not
 * the host's loopback, where the battery listens (under egress-any: the
 * job's own). The answer is the calls' common errno, or where one call was
 * refused differently from the others, that one's: another layer stopped
 * it (a kernel whose Landlock sees the implicit connect answers EACCES
 * where a seccomp row is missing), and the mutation analysis must see the
 * change. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "probe.h"

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

static const char msg[] = PROBE_NAME "\n";

/* One Fast Open send by `call` on a fresh socket: the bytes queued, or -1
 * with errno set. */
static ssize_t fastopen(const char *call, const struct sockaddr_in *sa) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_INET, SOCK_STREAM)");
  struct iovec iov = {(void *)msg, sizeof msg - 1};
  struct msghdr mh = {.msg_name = (void *)sa, .msg_namelen = sizeof *sa, .msg_iov = &iov, .msg_iovlen = 1};
  struct mmsghdr mm = {.msg_hdr = mh};
  ssize_t n;
  if (strcmp(call, "sendto") == 0)
    n = sendto(fd, msg, sizeof msg - 1, MSG_FASTOPEN, (const struct sockaddr *)sa, sizeof *sa);
  else if (strcmp(call, "sendmsg") == 0)
    n = sendmsg(fd, &mh, MSG_FASTOPEN);
  else
    /* The system call itself: musl's sendmmsg is a loop of sendmsg. */
    n = syscall(SYS_sendmmsg, fd, &mm, 1, MSG_FASTOPEN) == 1 ? (ssize_t)mm.msg_len : -1;
  int err = errno;
  close(fd);
  errno = err;
  return n;
}

int main(void) {
  long port = probe_env_long("OARBANK_PROBE_TCP_PORT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  static const char *const calls[] = {"sendto", "sendmsg", "sendmmsg"};
  int errs[3] = {0, 0, 0};
  char said[256] = "";
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
    ssize_t n = fastopen(calls[i], &sa);
    if (n >= 0) escaped("%s(MSG_FASTOPEN) to 127.0.0.1:%ld queued %zd bytes", calls[i], port, n);
    if (errno == EOPNOTSUPP && i == 0)
      unsupported("sendto(MSG_FASTOPEN): EOPNOTSUPP (net.ipv4.tcp_fastopen has no client bit)");
    errs[i] = errno;
    size_t used = strlen(said);
    snprintf(said + used, sizeof said - used, "%s%s(MSG_FASTOPEN) %s", used ? ", " : "", calls[i],
             probe_errno_name(errno));
  }
  int answer = errs[0];
  for (size_t i = 0; i < 3; ++i)
    if (errs[i] != errs[(i + 1) % 3] && errs[i] != errs[(i + 2) % 3]) answer = errs[i];
  blocked(answer, "127.0.0.1:%ld: %s", port, said);
}
