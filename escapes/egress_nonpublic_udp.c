/* UDP datagrams to every non-public decoy, IPv4 and IPv6
 * ($OARBANK_PROBE_NONPUBLIC4 and _NONPUBLIC6 on $OARBANK_PROBE_EGRESS_PORT):
 * DNS to a LAN resolver, a metadata service over UDP, anything on the
 * LAN. What stops it: under egress-any the job's ruleset refuses each
 * datagram at once (EPERM from sendto); under net none seccomp refuses the
 * socket and under egress-allowlist SOCK_DGRAM (EPERM). A datagram sendto
 * accepts says "sent": the decoys' listeners say whether it arrived. */
#include "probe_net.h"

static int sent_any;

static int send_one(const char *text, long port) {
  struct sockaddr_storage ss;
  socklen_t len = probe_net_address(text, port, &ss);
  int fd = probe_net_socket(text, SOCK_DGRAM);
  if (fd < 0) return errno;
  static const char msg[] = PROBE_NAME "\n";
  int err = sendto(fd, msg, sizeof msg - 1, 0, (struct sockaddr *)&ss, len) < 0 ? errno : 0;
  close(fd);
  if (err == 0) sent_any = 1;
  return err;
}

/* Both lists, every address: a refusal of some must not hide a send to
 * another. */
static void each(const char *list, long port, struct probe_net_tally *t) {
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", list);
  for (char *save = NULL, *a = strtok_r(copy, ",", &save); a != NULL; a = strtok_r(NULL, ",", &save)) {
    int err = send_one(a, port);
    if (err != 0) probe_net_note(t, a, err);
  }
}

int main(void) {
  const char *v4 = probe_net_env("OARBANK_PROBE_NONPUBLIC4");
  const char *v6 = probe_net_env("OARBANK_PROBE_NONPUBLIC6");
  long port = strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10);
  struct probe_net_tally t = {{0}, {0}, 0, 0, 0};
  each(v4, port, &t);
  each(v6, port, &t);
  if (sent_any) sent("sendto accepted datagrams to non-public decoys%s%s", *t.refused ? "; refused: " : "", t.refused);
  probe_net_verdict(&t, port);
}
