/* TCP connections to every non-public IPv6 class a job must never reach,
 * each a decoy listening in the battery's network world
 * ($OARBANK_PROBE_NONPUBLIC6 on $OARBANK_PROBE_EGRESS_PORT): unique local,
 * documentation, 6to4 and NAT64 forms of a private IPv4 address, Teredo,
 * site-local, and the host's own IPv6 address. What stops it: under
 * egress-any the job's ruleset refuses them at once (a TCP reset:
 * ECONNREFUSED, where every decoy listens); under net none seccomp refuses the
 * socket (EPERM); under egress-allowlist Landlock the port (EACCES). */
#include "probe_net.h"

int main(void) {
  const char *list = probe_net_env("OARBANK_PROBE_NONPUBLIC6");
  probe_net_connect_all(list, strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10));
}
