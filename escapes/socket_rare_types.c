/* IPv4 and IPv6 sockets of the types and protocols no job's network needs:
 * raw (hand-made packets), reliable datagrams, sequenced packets (SCTP),
 * DCCP, the old SOCK_PACKET (a packet socket under AF_INET), and the SCTP
 * and UDP-Lite protocols under a plain type. Each opens code that the
 * egress rules (Landlock's TCP ports, the proxy, the job's ruleset) were not
 * written for, and the seccomp filter refuses each with a row of its own
 * (EPERM) under every policy that allows IPv4 or IPv6 at all (net none
 * refuses the families). Each is asked for so that the kernel answers
 * without a capability (raw with protocol 0: EPROTONOSUPPORT; a type or
 * protocol the kernel lacks: ESOCKTNOSUPPORT or EPROTONOSUPPORT): any answer
 * but the filter's EPERM reached the kernel. SOCK_PACKET under AF_INET asks
 * for CAP_NET_RAW first (EPERM from the kernel too, where the cage took the
 * capability). */
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

#ifndef SOCK_DCCP
#define SOCK_DCCP 6
#endif
#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif

int main(void) {
  static const struct {
    const char *name;
    int family, type, protocol;
  } asks[] = {
      {"AF_INET/SOCK_RAW", AF_INET, SOCK_RAW, 0},
      {"AF_INET6/SOCK_RAW", AF_INET6, SOCK_RAW, 0},
      {"AF_INET/SOCK_RDM", AF_INET, SOCK_RDM, 0},
      {"AF_INET6/SOCK_RDM", AF_INET6, SOCK_RDM, 0},
      {"AF_INET/SOCK_SEQPACKET", AF_INET, SOCK_SEQPACKET, 0},
      {"AF_INET6/SOCK_SEQPACKET", AF_INET6, SOCK_SEQPACKET, 0},
      {"AF_INET/SOCK_DCCP", AF_INET, SOCK_DCCP, 0},
      {"AF_INET6/SOCK_DCCP", AF_INET6, SOCK_DCCP, 0},
      {"AF_INET/SOCK_PACKET", AF_INET, SOCK_PACKET, 0},
      {"AF_INET6/SOCK_PACKET", AF_INET6, SOCK_PACKET, 0},
      {"AF_INET/IPPROTO_SCTP", AF_INET, SOCK_STREAM, IPPROTO_SCTP},
      {"AF_INET6/IPPROTO_SCTP", AF_INET6, SOCK_STREAM, IPPROTO_SCTP},
      {"AF_INET/IPPROTO_UDPLITE", AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE},
      {"AF_INET6/IPPROTO_UDPLITE", AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE},
  };
  struct probe_call calls[sizeof asks / sizeof asks[0]];
  for (size_t i = 0; i < sizeof asks / sizeof asks[0]; ++i)
    calls[i] = probe_call(asks[i].name, socket(asks[i].family, asks[i].type | SOCK_CLOEXEC, asks[i].protocol));
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EPERM);
}
