/* A TCP connection to a public test host's IPv4 address,
 * $OARBANK_PROBE_PUBLIC4:$OARBANK_PROBE_EGRESS_PORT, which answers "HELLO".
 * The positive control of egress-any: its job reaches public addresses,
 * through the user-mode stack, past the job's ruleset. What stops it
 * elsewhere: under net none seccomp refuses the socket (EPERM); under
 * egress-allowlist Landlock allows TCP connect to the proxy port only
 * (EACCES). */
#include "probe_net.h"

int main(void) { probe_net_public("OARBANK_PROBE_PUBLIC4", SOCK_STREAM); }
