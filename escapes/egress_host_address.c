/* TCP connections to the host itself from outside its loopback: the
 * supervisor's own address ($OARBANK_PROBE_HOST_ADDRESSES, where the
 * battery listens on $OARBANK_PROBE_EGRESS_PORT) and the user-mode stack's
 * gateway 10.0.2.2, which a stack configured to map the host's loopback
 * there would lead to the host's services. What stops it: under egress-any
 * the job's ruleset refuses the host's addresses and the gateway
 * at once (a TCP reset: ECONNREFUSED); under net none seccomp (EPERM); under egress-allowlist
 * Landlock the port (EACCES). Unconfined it reaches the first. */
#include "probe_net.h"

int main(void) {
  const char *list = probe_net_env("OARBANK_PROBE_HOST_ADDRESSES");
  probe_net_connect_all(list, strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10));
}
