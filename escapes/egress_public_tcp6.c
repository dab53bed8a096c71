/* A TCP connection to a public test host's IPv6 address (the NAT64 form
 * 64:ff9b::/96 of a public IPv4 address, which is public too),
 * $OARBANK_PROBE_PUBLIC6:$OARBANK_PROBE_EGRESS_PORT, which answers "HELLO".
 * The positive control of egress-any: its job reaches public addresses,
 * through the user-mode stack, past the job's ruleset. What stops it
 * elsewhere: under net none seccomp refuses the socket (EPERM); under
 * egress-allowlist Landlock allows TCP connect to the proxy port only
 * (EACCES). */
#include "probe_net.h"

int main(void) { probe_net_public("OARBANK_PROBE_PUBLIC6", SOCK_STREAM); }
