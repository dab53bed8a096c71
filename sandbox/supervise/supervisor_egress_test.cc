// An egress-allowlist job run by the supervisor (job_egress.h): its network
// namespace is its own, holds only `lo`, and its one listener is the
// agent's proxy; nothing on the host listening on the proxy's port number
// is reachable from it. As root and, rootless, as uid 65534 (a forked test
// child drops to it first). Decoy listeners on the host, on the proxy's
// port of 127.0.0.1 and 127.0.0.2, must have seen nothing; the proxy's own
// answer (403 for an unlisted name) proves the job's listener is served.
// In the test process itself: repeated jobs, ending every way, leave no
// thread and no fd of their proxies behind.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "sandbox/egress/proxy.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/supervise/supervisor.h"
#include "sandbox/testing/child.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::TempTree;
using testing::UnprovenOptions;
using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

// The job: its links, the proxy's answer on 127.0.0.1:<port>, a connect to
// 127.0.0.2:<port>, its network namespace, then the sockets it and the
// job's init (pid 1) hold. One line each.
constexpr char kJob[] = R"(
import errno, os, socket
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
print(",".join(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])))
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n")
print(s.makefile("rb").readline().decode().strip())
s.close()
c = socket.socket()
c.settimeout(3)
try:
    c.connect(("127.0.0.2", port))
    print("connected")
except OSError as e:
    print("connect " + errno.errorcode.get(e.errno, str(e.errno)))
c.close()
print(os.readlink("/proc/self/ns/net"))
def sockets(pid):
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError as e:
        return "unreadable " + errno.errorcode.get(e.errno, str(e.errno))
    links = []
    for f in fds:
        try:
            links.append(os.readlink("/proc/%s/fd/%s" % (pid, f)))
        except OSError:
            pass
    return str(sum(l.startswith("socket:") for l in links)) + " sockets"
print(sockets("self"), sockets(1))
)";

// A listening socket on address:port (0: any), non-blocking, or -1.
int Listen(const char* address, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, address, &a.sin_addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// True when a connection is waiting on the (non-blocking) listener.
bool Accepted(int listener) {
  const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c >= 0) close(c);
  return c >= 0;
}

std::string HostNetNamespace() {
  char buf[64] = {};
  return readlink("/proc/self/ns/net", buf, sizeof buf - 1) > 0 ? buf : "";
}

size_t Entries(const char* dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

std::string Skip() {
  const auto a = cage::CheckAvailability();
  if (!a.available) return "the cage is not available here: " + a.reason;
  if (ProbeHost().landlock_abi < 4) return "Landlock ABI < 4: egress-allowlist is refused here (tested in plan_test)";
  return "";
}

class SupervisorEgressTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    if (GetParam() != getuid() && getuid() != 0) GTEST_SKIP() << "switching to uid " << GetParam() << " needs root";
    if (const std::string why = Skip(); !why.empty()) GTEST_SKIP() << why;
    (void)!chmod(tree_.Path("bundle").c_str(), 0755);
    std::ofstream(tree_.Path("bundle/job.py")) << kJob;
  }

  // Runs the job in a forked child as the parameter's uid; its stdout, or
  // "fault: <reason>".
  std::string RunJob(uint16_t port) {
    const std::string json = tree_.RunnerJson(R"("net": {"mode": "egress-allowlist", "allow": ["allowed.example"],
                                              "proxy_port": )" +
                                              std::to_string(port) + "}");
    return testing::RunInChild([&] {
             std::string text;
             if (!testing::BecomeUser(GetParam())) {
               text = "fault: setuid";
             } else if (auto policy = ParsePolicy(json); !policy.ok()) {
               text = "fault: " + PolicyErrorLine(policy.error());
             } else {
               cage::RunOptions o = UnprovenOptions();
               o.cwd = tree_.Path("work");
               cage::JobHooks hooks;
               hooks.egress = std::make_shared<JobEgressOptions>(JobEgressOptions{.log = [](const std::string&) {}});
               const auto r =
                   cage::RunPolicy(policy.value(), {"/usr/bin/python3", tree_.Path("bundle/job.py")}, o, hooks);
               text = r.fault == cage::Fault::kNone && r.exit_code == 0
                          ? r.stdout_text
                          : "fault: " + std::string(cage::FaultName(r.fault)) + ": " + r.reason + " " + r.stderr_text;
             }
             return text;
           })
        .text;
  }

  TempTree tree_;
};

TEST_P(SupervisorEgressTest, TheJobsOnlyListenerIsTheProxyAndNothingElseOnItsPortIsReachable) {
  // Decoys on the host's loopback, on the port the job's proxy will use.
  const int decoy = Listen("127.0.0.1", 0);
  ASSERT_GE(decoy, 0);
  const uint16_t port = PortOf(decoy);
  const int other = Listen("127.0.0.2", port);
  ASSERT_GE(other, 0) << "127.0.0.2:" << port;

  const std::string out = RunJob(port);
  std::istringstream lines(out);
  std::string links, answer, other_connect, netns;
  std::getline(lines, links);
  std::getline(lines, answer);
  std::getline(lines, other_connect);
  std::getline(lines, netns);
  std::string held;
  std::getline(lines, held);
  // The listener went to the supervisor: neither the module nor init keeps it.
  EXPECT_EQ(held, "0 sockets 0 sockets") << out;
  EXPECT_EQ(links, "lo") << out;
  // The supervisor's proxy answered on the job's 127.0.0.1:<port>.
  EXPECT_EQ(answer, "HTTP/1.1 403 Forbidden") << out;
  // In the host's network this connect succeeds (the positive control below).
  EXPECT_EQ(other_connect, "connect ECONNREFUSED") << out;
  EXPECT_NE(netns, HostNetNamespace()) << out;
  EXPECT_EQ(netns.rfind("net:[", 0), 0u) << out;
  EXPECT_FALSE(Accepted(decoy)) << "the host's 127.0.0.1:" << port << " saw the job";
  EXPECT_FALSE(Accepted(other)) << "the host's 127.0.0.2:" << port << " saw the job";
  // Positive control: from the host's network both decoys are reachable.
  for (const char* address : {"127.0.0.1", "127.0.0.2"}) {
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, address, &a.sin_addr);
    EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << address;
    close(c);
  }
  EXPECT_TRUE(Accepted(decoy));
  EXPECT_TRUE(Accepted(other));
  close(decoy);
  close(other);
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SupervisorEgressTest, ::testing::Values(uid_t{0}, kNobody),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("root") : std::string("nobody");
                         });

// The proxy serves a listener it is given, and refuses (and closes) one
// that cannot be served.
TEST(EgressProxyListenerTest, ServesAGivenListenerAndClosesABadOne) {
  egress::ProxyConfig bad;
  bad.allow.push_back(egress::ParseAllowEntry("allowed.example").value());
  bad.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not listening
  ASSERT_GE(bad.listen_fd, 0);
  const int bad_fd = bad.listen_fd;
  auto refused = egress::EgressProxy::Start(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().where, "listen");
  EXPECT_EQ(refused.error().what, "the listener fd is not listening");
  EXPECT_EQ(fcntl(bad_fd, F_GETFD), -1) << "the refused listener was left open";

  const int outside = Listen("10.255.255.1", 0);  // not loopback (when this host even has it)
  if (outside >= 0) {
    egress::ProxyConfig c = bad;
    c.listen_fd = outside;
    auto r = egress::EgressProxy::Start(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().where, "listen");
  }

  egress::ProxyConfig good = bad;
  good.listen_fd = Listen("127.0.0.1", 0);
  ASSERT_GE(good.listen_fd, 0);
  const uint16_t port = PortOf(good.listen_fd);
  good.log = [](const std::string&) {};
  auto proxy = egress::EgressProxy::Start(good);
  ASSERT_TRUE(proxy.ok()) << proxy.error().what;
  EXPECT_EQ(proxy.value()->port(), port);
  EXPECT_EQ(proxy.value()->address(), "127.0.0.1");
  const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char request[] = "CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n";
  ASSERT_EQ(write(c, request, sizeof request - 1), static_cast<ssize_t>(sizeof request - 1));
  char answer[64] = {};
  ASSERT_GT(read(c, answer, sizeof answer - 1), 0);
  EXPECT_EQ(std::string(answer).rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << answer;
  close(c);
  proxy.value()->Stop();
  // Stopped: the listener is closed.
  const int again = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(connect(again, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  close(again);
}

// In this process: the proxies of many jobs, ended by exit, timeout, a
// failed exec and a refusal at the gate, are all stopped and joined.
TEST(SupervisorEgressLeakTest, RepeatedEgressJobsLeaveNoThreadOrFd) {
  if (const std::string why = Skip(); !why.empty()) GTEST_SKIP() << why;
  TempTree tree;
  const int decoy = Listen("127.0.0.1", 0);
  ASSERT_GE(decoy, 0);
  const uint16_t port = PortOf(decoy);
  close(decoy);
  const Policy policy = tree.Runner(R"("net": {"mode": "egress-allowlist", "allow": ["allowed.example"],
                                    "proxy_port": )" +
                                    std::to_string(port) + "}");
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree.Path("work");
  std::atomic<int> logged{0};
  cage::JobHooks hooks;
  hooks.egress =
      std::make_shared<JobEgressOptions>(JobEgressOptions{.log = [&logged](const std::string&) { ++logged; }});
  // A connection to the job's proxy, refused by it (logged), then exit 0.
  const std::vector<std::string> probe = {
      "/usr/bin/python3", "-c",
      "import os,socket\nport=int(os.environ['HTTPS_PROXY'].rsplit(':',1)[1])\n"
      "s=socket.create_connection(('127.0.0.1',port))\ns.sendall(b'CONNECT x.example:443 HTTP/1.1\\r\\n\\r\\n')\n"
      "print(s.recv(100).split(b'\\r\\n')[0].decode())"};
  ASSERT_EQ(cage::RunPolicy(policy, probe, o, hooks).stdout_text, "HTTP/1.1 403 Forbidden\n");  // warm caches
  const size_t threads = Entries("/proc/self/task");
  const size_t fds = Entries("/proc/self/fd");
  const int before = logged;
  for (int i = 0; i < 8; ++i) {
    const auto r = cage::RunPolicy(policy, probe, o, hooks);
    EXPECT_EQ(r.stdout_text, "HTTP/1.1 403 Forbidden\n") << r.reason << r.stderr_text;
  }
  EXPECT_EQ(logged - before, 8);
  cage::RunOptions timed = o;
  timed.timeout = 300ms;
  const auto slow = cage::RunPolicy(policy, {"/bin/sleep", "30"}, timed);
  EXPECT_EQ(slow.fault, cage::Fault::kTimeout) << slow.reason;
  const auto missing = cage::RunPolicy(policy, {"/nonexistent/module"}, o, hooks);
  EXPECT_EQ(missing.fault, cage::Fault::kExec) << missing.reason;
  // While a job runs its proxy's threads exist (so the counts below can
  // see one); Wait() stops them, before the Job itself is gone.
  {
    auto job = cage::Start(policy, {"/bin/sleep", "0.3"}, o);
    EXPECT_GT(Entries("/proc/self/task"), threads) << "no proxy thread while the job runs";
    EXPECT_EQ(job.Wait().exit_code, 0);
    EXPECT_EQ(Entries("/proc/self/task"), threads) << "the proxy outlived Wait()";
    EXPECT_EQ(Entries("/proc/self/fd"), fds) << "an fd outlived Wait()";
  }
  // Killed while it runs: Job's destructor aborts and stops the proxy.
  { auto job = cage::Start(policy, {"/bin/sleep", "30"}, o); }
  EXPECT_EQ(Entries("/proc/self/task"), threads) << "a proxy thread outlived its job";
  EXPECT_EQ(Entries("/proc/self/fd"), fds) << "an fd outlived its job";
}

}  // namespace
}  // namespace oarbank
