/* A UDP datagram to a public test host's IPv6 address (the NAT64 form
 * 64:ff9b::/96 of a public IPv4 address, which is public too),
 * $OARBANK_PROBE_PUBLIC6:$OARBANK_PROBE_EGRESS_PORT, which answers "ECHO".
 * The positive control of egress-any for UDP (DNS, QUIC). What stops it
 * elsewhere: seccomp refuses the socket under net none and SOCK_DGRAM under
 * egress-allowlist (EPERM). */
#include "probe_net.h"

int main(void) { probe_net_public("OARBANK_PROBE_PUBLIC6", SOCK_DGRAM); }
