/* Socket families beside unix, IPv4 and IPv6 below AF_INET6 (AF_UNSPEC,
 * AX.25, IPX, AppleTalk, NET/ROM, bridge, ATM PVC, X.25): each opens a
 * protocol stack (and on many kernels loads its module) that no job needs.
 * The seccomp filter refuses each with a row of its own (EPERM). Here each
 * is asked for with a socket type no family has (99), which the kernel
 * answers EINVAL before it looks the family up or loads anything; and a
 * socketpair of another family than unix (EOPNOTSUPP for IPv4). */
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  static const struct {
    const char *name;
    int family;
  } families[] = {{"AF_UNSPEC", 0}, {"AF_AX25", 3},  {"AF_IPX", 4},     {"AF_APPLETALK", 5},
                  {"AF_NETROM", 6}, {"AF_BRIDGE", 7}, {"AF_ATMPVC", 8}, {"AF_X25", 9}};
  struct probe_call calls[sizeof families / sizeof families[0] + 1];
  size_t n = 0;
  for (; n < sizeof families / sizeof families[0]; ++n)
    calls[n] = probe_call(families[n].name, socket(families[n].family, 99, 0));
  /* A pair of another family than unix (TIPC's would load its module). */
  int pair[2];
  calls[n++] = probe_call("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, pair));
  verdict_calls_reached(calls, n, EPERM);
}
