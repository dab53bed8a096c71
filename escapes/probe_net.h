/* Helpers for the probes that reach the battery's network world (the
 * OARBANK_PROBE_EGRESS_PORT, _PUBLIC4, _PUBLIC6, _NONPUBLIC4, _NONPUBLIC6
 * and _HOST_ADDRESSES variables, escapes/README.md). The world exists only
 * where the agent enforces egress-any; without it these probes say
 * unsupported: there is no public host to reach. */
#ifndef OARBANK_PROBE_NET_H
#define OARBANK_PROBE_NET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "probe.h"

/* A variable of the network world, or unsupported without one. */
static inline const char *probe_net_env(const char *name) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0')
    unsupported("%s not set: the battery builds its network world only where the agent enforces egress-any", name);
  return v;
}

/* `text` (IPv4 or IPv6) and `port` as a socket address; the probe's error if
 * it is not an address. */
static inline socklen_t probe_net_address(const char *text, long port, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (strchr(text, ':') == NULL) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, text, &a->sin_addr) != 1) probe_error("not an address: %s", text);
    return sizeof *a;
  }
  struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
  a->sin6_family = AF_INET6;
  a->sin6_port = htons((uint16_t)port);
  if (inet_pton(AF_INET6, text, &a->sin6_addr) != 1) probe_error("not an address: %s", text);
  return sizeof *a;
}

/* A socket of `type` for `text`'s family, with send and receive timeouts
 * (3 s), so a dropped packet ends as a timeout, never a hang; -1 with errno
 * when the cage refuses it. */
static inline int probe_net_socket(const char *text, int type) {
  int fd = socket(strchr(text, ':') ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval t = {.tv_sec = 3};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  return fd;
}

/* The verdict over many attempts: escaped if any got through, naming each
 * that did; blocked only if every one was refused with the same errno (a mix
 * of answers is the probe's error, so no row can match half of them). */
struct probe_net_tally {
  char reached[512], refused[768];
  int first_err, mixed, n;
};

static inline void probe_net_note(struct probe_net_tally *t, const char *address, int err) {
  ++t->n;
  if (err == 0) {
    snprintf(t->reached + strlen(t->reached), sizeof t->reached - strlen(t->reached), "%s%s", *t->reached ? ", " : "",
             address);
    return;
  }
  snprintf(t->refused + strlen(t->refused), sizeof t->refused - strlen(t->refused), "%s%s %s",
           *t->refused ? ", " : "", address, probe_errno_name(err));
  if (t->first_err == 0) t->first_err = err;
  else if (err != t->first_err) t->mixed = 1;
}

static inline void probe_net_verdict(const struct probe_net_tally *t, long port) {
  if (*t->reached) escaped("reached %s (port %ld)%s%s", t->reached, port, *t->refused ? "; refused: " : "", t->refused);
  if (t->mixed) probe_error("refused with different errnos: %s", t->refused);
  if (t->n == 0) probe_error("no address to try");
  blocked(t->first_err, "every one of %d refused: %s", t->n, t->refused);
}

/* A TCP connect to every address of the comma-separated `list` (at most 32)
 * at once, non-blocking, each given 3 s: a refusal by ICMP can take the
 * SYN's first retransmission (a second) to reach connect(). Each connection
 * made says the probe's name (the listeners attribute what reaches them by
 * it). Ends the probe with probe_net_verdict, as soon as one connection is
 * made or every one is answered. */
static inline void probe_net_connect_all(const char *list, long port) {
  struct probe_net_tally t = {{0}, {0}, 0, 0, 0};
  char copy[1024], *names[32];
  struct pollfd fds[32];
  int pending = 0;
  snprintf(copy, sizeof copy, "%s", list);
  for (char *save = NULL, *a = strtok_r(copy, ",", &save); a != NULL && t.n + pending < 32;
       a = strtok_r(NULL, ",", &save)) {
    struct sockaddr_storage ss;
    socklen_t len = probe_net_address(a, port, &ss);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      probe_net_note(&t, a, errno);
      continue;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS) {
      names[pending] = a;
      fds[pending++] = (struct pollfd){fd, POLLOUT, 0};
      continue;
    }
    probe_net_note(&t, a, errno);
    close(fd);
  }
  /* Once one got through the verdict is known (escaped): the rest are not
   * waited for. */
  for (int left = pending, waited = 0; left > 0 && waited < 3000 && !*t.reached; waited += 50) {
    if (poll(fds, (nfds_t)pending, 50) < 0 && errno != EINTR) break;
    for (int i = 0; i < pending; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      int err = 0;
      socklen_t elen = sizeof err;
      getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &elen);
      if (err == 0) (void)!write(fds[i].fd, PROBE_NAME "\n", sizeof PROBE_NAME);
      probe_net_note(&t, names[i], err);
      close(fds[i].fd);
      fds[i].fd = -1;
      --left;
    }
  }
  for (int i = 0; i < pending; ++i)
    if (fds[i].fd >= 0) {
      if (!*t.reached) probe_net_note(&t, names[i], ETIMEDOUT);
      close(fds[i].fd);
    }
  probe_net_verdict(&t, port);
}

/* One exchange with a public test host ($OARBANK_PROBE_<var>, on
 * $OARBANK_PROBE_EGRESS_PORT): over TCP (SOCK_STREAM) it answers
 * "HELLO <line>", over UDP (SOCK_DGRAM) "ECHO <line>". Escaped only on the
 * answer: through a user-mode stack, a packet sent is not yet a packet
 * delivered. Ends the probe. */
static inline void probe_net_public(const char *var, int type) {
  const char *host = probe_net_env(var);
  long port = strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10);
  const char *proto = type == SOCK_STREAM ? "TCP" : "UDP";
  const char *greeting = type == SOCK_STREAM ? "HELLO " : "ECHO ";
  struct sockaddr_storage ss;
  socklen_t len = probe_net_address(host, port, &ss);
  int fd = probe_net_socket(host, type);
  if (fd < 0) blocked(errno, "socket (%s) for %s", proto, host);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0)
    blocked(errno == EINPROGRESS ? ETIMEDOUT : errno, "connect (%s) %s", proto, host);
  static const char msg[] = PROBE_NAME "\n";
  if (send(fd, msg, sizeof msg - 1, 0) < 0) blocked(errno, "send (%s) to %s", proto, host);
  char answer[128] = "";
  ssize_t n = recv(fd, answer, sizeof answer - 1, 0);
  if (n < 0) blocked(errno == EAGAIN ? ETIMEDOUT : errno, "sent (%s) to %s, no answer", proto, host);
  if (n == 0) blocked(ECONNRESET, "connected (%s) to %s, closed without an answer", proto, host);
  answer[n] = '\0';
  if (strncmp(answer, greeting, strlen(greeting)) != 0) probe_error("%s answered something else: %s", host, answer);
  escaped("the public test host %s answered over %s", host, proto);
}

#endif
