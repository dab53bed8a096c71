// The cage side of net.mode = "egress-allowlist", on this kernel: a confined
// child may open IPv4/IPv6 TCP stream sockets and connect to the proxy port
// alone (Landlock ABI 4 TCP rule), never bind, never open UDP (so it cannot
// resolve names itself), raw, SCTP or MPTCP sockets, and never use
// MSG_FASTOPEN. Run at the kernel's ABI (the always-on rules need ABI 6, so
// a capped ABI 4 or 5 refuses every policy; that the egress capability alone
// needs ABI 4 is in plan_test.cc and harness/test_egress.py), with the
// confined side as root and as uid 65534.
// The listeners are outside the cage: what they accepted is the evidence.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "sandbox/launch/enforce.h"
#include "sandbox/testing/confined.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::TempTree;

constexpr uid_t kNobody = 65534;

// A listening TCP socket on loopback (v4 or v6), port chosen by the kernel.
struct Listener {
  int fd = -1;
  int port = 0;
  explicit Listener(int family) {
    fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 16) != 0) return;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  ~Listener() { close(fd); }
  // Connections accepted so far (drains the queue).
  int Accepted() {
    int n = 0;
    for (int c; (c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) close(c);
    return n;
  }
};

int Errno(long ret) { return ret == -1 ? errno : 0; }

int ConnectErr(int family, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1000 + errno;  // distinguishes "socket refused" from "connect refused"
  int rc;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  const int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

// Parameter: the confined uid.
class EgressConfineTest : public testing::ConfinedTest {
 protected:
  Policy Egress(int proxy_port) {
    return tree_.Runner(R"("net": {"mode": "egress-allowlist", "allow": ["api.example.org"], "proxy_port": )" +
                        std::to_string(proxy_port) + "}");
  }

  // Runs `call` in a forked child confined by `policy` as the test's uid;
  // returns its result, or -1000 - signal / -1 on a setup failure.
  int RunConfined(const Policy& policy, const std::function<int()>& call) {
    const auto c = Confined(policy, call);
    if (!c.setup_error.empty()) ADD_FAILURE() << c.setup_error;
    return c.signal != 0 ? -1000 - c.signal : c.value;
  }
};

TEST_P(EgressConfineTest, TcpConnectReachesTheProxyPortAlone) {
  Listener proxy(AF_INET), other(AF_INET), other6(AF_INET6);
  ASSERT_GT(proxy.port, 0);
  ASSERT_GT(other.port, 0);
  const Policy policy = Egress(proxy.port);
  EXPECT_EQ(RunConfined(policy, [&] { return ConnectErr(AF_INET, proxy.port); }), 0);
  EXPECT_EQ(RunConfined(policy, [&] { return ConnectErr(AF_INET, other.port); }), EACCES);
  if (other6.port > 0) {
    EXPECT_EQ(RunConfined(policy, [&] { return ConnectErr(AF_INET6, other6.port); }), EACCES);
  }
  // A name server over TCP is another port too.
  EXPECT_EQ(RunConfined(policy, [&] { return ConnectErr(AF_INET, 53); }), EACCES);
  EXPECT_EQ(proxy.Accepted(), 1);  // at the listeners: the proxy's one connection
  EXPECT_EQ(other.Accepted(), 0);
  EXPECT_EQ(other6.Accepted(), 0);
  // Positive control: unconfined, the other port accepts.
  EXPECT_EQ(ConnectErr(AF_INET, other.port), 0);
  EXPECT_EQ(other.Accepted(), 1);
}

TEST_P(EgressConfineTest, OnlyTcpStreamSocketsExist) {
  const Policy policy = Egress(3128);
  for (int family : {AF_INET, AF_INET6}) {
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_STREAM, 0)); }), 0);
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_STREAM, IPPROTO_TCP)); }), 0);
    // No UDP: the module cannot ask a name server itself.
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_DGRAM, 0)); }), EPERM);
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP)); }),
              EPERM);
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_RAW, IPPROTO_ICMP)); }), EPERM);
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_SEQPACKET, IPPROTO_SCTP)); }), EPERM);
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(socket(family, SOCK_STREAM, 262 /* IPPROTO_MPTCP */)); }), EPERM);
  }
  // Positive control: unconfined, a UDP socket opens.
  const int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(udp, 0);
  close(udp);
}

TEST_P(EgressConfineTest, NothingBindsOrListens) {
  const Policy policy = Egress(3128);
  auto bind_loopback = [] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int err = Errno(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a));
    close(fd);
    return err;
  };
  EXPECT_EQ(bind_loopback(), 0);  // unconfined it binds
  EXPECT_EQ(RunConfined(policy, bind_loopback), EPERM);
  EXPECT_EQ(RunConfined(policy,
                        [] {
                          const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                          const int err = Errno(listen(fd, 1));
                          close(fd);
                          return err;
                        }),
            EPERM);
}

TEST_P(EgressConfineTest, TcpFastOpenCannotConnectAroundLandlock) {
  Listener other(AF_INET);
  const Policy policy = Egress(3128);
  EXPECT_EQ(RunConfined(policy,
                        [&] {
                          const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                          sockaddr_in a{};
                          a.sin_family = AF_INET;
                          a.sin_port = htons(static_cast<uint16_t>(other.port));
                          a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                          const int err =
                              Errno(sendto(fd, "x", 1, MSG_FASTOPEN, reinterpret_cast<sockaddr*>(&a), sizeof a));
                          close(fd);
                          return err;
                        }),
            EPERM);
  EXPECT_EQ(other.Accepted(), 0);
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, EgressConfineTest, ::testing::Values(uid_t{0}, kNobody),
                         [](const auto& info) { return std::string(info.param == 0 ? "root" : "nobody"); });

}  // namespace
}  // namespace oarbank
