/* A UDP datagram to a public test host's IPv4 address,
 * $OARBANK_PROBE_PUBLIC4:$OARBANK_PROBE_EGRESS_PORT, which answers "ECHO".
 * The positive control of egress-any for UDP (DNS, QUIC). What stops it
 * elsewhere: seccomp refuses the socket under net none and SOCK_DGRAM under
 * egress-allowlist (EPERM). */
#include "probe_net.h"

int main(void) { probe_net_public("OARBANK_PROBE_PUBLIC4", SOCK_DGRAM); }
