/* TCP connections to every non-public IPv4 class a job must never reach,
 * each a decoy listening in the battery's network world
 * ($OARBANK_PROBE_NONPUBLIC4 on $OARBANK_PROBE_EGRESS_PORT): private
 * (10/8, 172.16/12, 192.168/16), shared (100.64/10), the cloud metadata
 * address 169.254.169.254, documentation, IETF, benchmarking outside the
 * declared public range, and a private address in its IPv4-mapped IPv6
 * form. What stops it: under egress-any the job's ruleset refuses them at
 * once (a TCP reset: ECONNREFUSED, where every decoy listens); under net none seccomp
 * refuses the socket (EPERM); under egress-allowlist Landlock the port
 * (EACCES). Any decoy reached is an escape, and the decoys record it. */
#include "probe_net.h"

int main(void) {
  const char *list = probe_net_env("OARBANK_PROBE_NONPUBLIC4");
  probe_net_connect_all(list, strtol(probe_net_env("OARBANK_PROBE_EGRESS_PORT"), NULL, 10));
}
