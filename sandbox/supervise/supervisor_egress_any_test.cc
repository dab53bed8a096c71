// An egress-any job through the library (cage::Run(Spec) with egress_any):
// its network namespace leads out only through the agent's stack, and the
// ruleset refuses the stack's gateway (never the host's loopback), the
// host's own addresses and the metadata address. A decoy listening on every
// address of the host sees nothing; the job's own loopback is its own.
// Root supervisor; the job as root and as uid 65534 (run_as). The world of
// public servers is harness/test_egress_any.py's: a test here never leaves
// the machine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "sandbox/common/read_file.h"
#include "sandbox/egress/job_ruleset.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/supervisor.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::TempTree;
using testing::UnprovenOptions;

constexpr uid_t kNobody = 65534;

// argv[1]: the port; argv[2..]: addresses. One line each: "ADDR RESULT".
constexpr char kJob[] = R"(
import errno, socket, sys
port = int(sys.argv[1])
for addr in sys.argv[2:]:
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(3)
    try:
        s.connect((addr, port))
        print(addr, "connected")
    except OSError as e:
        print(addr, "connect", errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__)
    s.close()
)";

int ListenAny(uint16_t* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0) return -1;
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

bool Accepted(int listener) {
  const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c >= 0) close(c);
  return c >= 0;
}

class SupervisorEgressAnyTest : public ::testing::TestWithParam<uid_t> {};

// The tun device as a uid-65534 agent sees it: a device only root may open
// refuses egress-any with one line naming the device, its mode and what to
// do; one anybody may open does not; a file or nothing there is named.
TEST(TunDevice, OneOnlyRootMayOpenRefusesAnUnprivilegedAgent) {
  if (getuid() != 0) GTEST_SKIP() << "mknod and the switch to uid 65534 need root";
  TempTree tree;
  const std::string dev = tree.Path("tun");
  ASSERT_EQ(mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << strerror(errno);  // /dev/null's numbers
  tree.Write("file", "not a device", 0666);
  auto as_nobody = [](const std::string& path) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    const pid_t child = fork();
    if (child == 0) {
      close(p[0]);
      if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) _exit(1);
      const std::string gap = TunDeviceGap(path).value_or("none");
      (void)!write(p[1], gap.data(), gap.size());
      _exit(0);
    }
    close(p[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    close(p[0]);
    int status = 0;
    waitpid(child, &status, 0);
    return out;
  };
  const std::string root_only = as_nobody(dev);
  EXPECT_NE(root_only.find("is mode 0600 owned by uid 0"), std::string::npos) << root_only;
  EXPECT_NE(root_only.find("uid 65534"), std::string::npos) << root_only;
  EXPECT_EQ(root_only.find('\n'), std::string::npos) << "one line";
  EXPECT_FALSE(TunDeviceGap(dev).has_value()) << "root opens a 0600 device";
  ASSERT_EQ(chmod(dev.c_str(), 0666), 0);
  EXPECT_EQ(as_nobody(dev), "none");
  EXPECT_NE(as_nobody(tree.Path("file")).find("is not a character device"), std::string::npos);
  EXPECT_NE(as_nobody(tree.Path("absent")).find("No such file or directory"), std::string::npos);
}

TEST_P(SupervisorEgressAnyTest, NothingOfTheHostIsReachableThroughTheStack) {
  if (getuid() != 0) GTEST_SKIP() << "the job as uid 65534 (run_as) needs a root supervisor";
  const JobNetworkProbe& probe = ProbeJobNetwork();
  ASSERT_TRUE(probe.ok) << "egress-any is not enforceable here: " << probe.missing << ": " << probe.detail;
  TempTree tree;
  std::ofstream(tree.Path("bundle/job.py")) << kJob;
  uint16_t port = 0;
  const int decoy = ListenAny(&port);  // the host's every address: loopback, its own, the gateway's target
  ASSERT_GE(decoy, 0);
  std::vector<std::string> targets = {"10.0.2.2", "169.254.169.254", "::ffff:10.0.2.2", "fd00::2"};
  for (const auto& a : HostAddresses())
    if (a.v4 || a.bytes[0] != 0xfe) targets.push_back(a.ToString());  // link-local needs a scope
  cage::Spec spec;
  spec.argv = {"/usr/bin/python3", tree.Path("bundle/job.py"), std::to_string(port)};
  spec.argv.insert(spec.argv.end(), targets.begin(), targets.end());
  spec.worktree = tree.Path("bundle");
  spec.scratch = tree.Path("work");
  spec.egress_any = true;
  cage::RunOptions o = UnprovenOptions();
  if (GetParam() != 0) {
    o.run_as_uid = GetParam();
    o.run_as_gid = GetParam();
  }
  const cage::Result r = cage::Run(spec, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.container.namespaces.find("net"), std::string::npos);
  EXPECT_NE(r.container.net.find("slirp4netns"), std::string::npos) << r.container.net;
  std::istringstream lines(r.stdout_text);
  size_t refused = 0;
  for (std::string line; std::getline(lines, line);) {
    const std::string addr = line.substr(0, line.find(' '));
    const bool loopback = addr == "127.0.0.1" || addr == "::1";
    if (loopback) {
      EXPECT_EQ(line, addr + " connect ECONNREFUSED") << "the job's loopback is its own";
      continue;
    }
    // The ruleset's TCP reset, at once (the decoy listens: nothing else
    // would refuse); counted below.
    EXPECT_EQ(line, addr + " connect ECONNREFUSED") << r.stdout_text;
    ++refused;
  }
  EXPECT_GE(refused, 4u) << r.stdout_text;
  EXPECT_GE(r.container.net_dropped, static_cast<long long>(refused));
  EXPECT_FALSE(Accepted(decoy)) << "a host listener saw the job";
  // Positive control: the decoy answers on the host's loopback.
  const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  close(c);
  usleep(50000);
  EXPECT_TRUE(Accepted(decoy));
  close(decoy);
}

// This process's children running the helper (comm is cut at 15 bytes).
std::vector<pid_t> HelperChildren() {
  std::vector<pid_t> found;
  // Advanced with an error code, not ++: a process may end while it is read.
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const auto& d = *it;
    const std::string name = d.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // Read without iostreams: libstdc++'s filebuf throws when read(2) fails,
    // as it does (ESRCH) on a process that ends mid-read.
    const std::optional<std::string> read = ReadFileUpTo(d.path() / "stat", 4096);
    if (!read) continue;
    const std::string& text = *read;
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid() && state != "Z" && text.substr(open + 1, close - open - 1) == "oarbank-netfilt")
      found.push_back(std::stoi(name));
  }
  return found;
}

// What each descriptor of `pid` is ("0 socket:[...]"), in fd order.
std::vector<std::string> Descriptors(pid_t pid) {
  std::vector<std::string> fds;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const auto& e = *it;
    char target[256] = {};
    const ssize_t n = readlink(e.path().c_str(), target, sizeof target - 1);
    fds.push_back(e.path().filename().string() + " " + (n > 0 ? std::string(target, static_cast<size_t>(n)) : "?"));
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

// One oarbank-netfilter per job, from the ruleset's install to the drop
// counters after the job; while the module runs it holds its session and
// its log and nothing else: no netlink socket (each request opens and
// closes its own), no namespace descriptor. After the job it is gone.
TEST(SupervisorEgressAnyHelper, OneHelperPerJobHoldingOnlyItsSessionWhileTheModuleRuns) {
  if (getuid() != 0) GTEST_SKIP() << "the job's network as the tests run it needs a root supervisor";
  const JobNetworkProbe& probe = ProbeJobNetwork();
  ASSERT_TRUE(probe.ok) << "egress-any is not enforceable here: " << probe.missing << ": " << probe.detail;
  TempTree tree;
  const std::string started = tree.Path("work/started");
  cage::Spec spec;
  spec.argv = {"/bin/sh", "-c", "echo > " + started + "; exec sleep 1"};
  spec.worktree = tree.Path("bundle");
  spec.scratch = tree.Path("work");
  spec.egress_any = true;
  std::atomic<bool> done{false};
  std::set<pid_t> helpers;
  std::vector<std::string> while_running;
  std::thread watcher([&] {
    while (!done) {
      const std::vector<pid_t> now = HelperChildren();
      helpers.insert(now.begin(), now.end());
      if (while_running.empty() && !now.empty() && access(started.c_str(), F_OK) == 0)
        while_running = Descriptors(now.front());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const cage::Result r = cage::Run(spec, UnprovenOptions());
  done = true;
  watcher.join();
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_GE(r.container.net_dropped, 0) << "the drop counter was read after the job";
  ASSERT_EQ(helpers.size(), 1u) << "one helper for the job's install, read-back and counters";
  ASSERT_EQ(while_running.size(), 3u) << ::testing::PrintToString(while_running);
  EXPECT_EQ(while_running[0].substr(0, 9), "0 socket:") << while_running[0];
  EXPECT_EQ(while_running[1], "1" + while_running[0].substr(1)) << "stdin and stdout are one socket";
  EXPECT_EQ(while_running[2].substr(0, 8), "2 /memfd") << while_running[2];
  EXPECT_TRUE(HelperChildren().empty()) << "the helper outlived the job";
  EXPECT_NE(kill(*helpers.begin(), 0), 0) << "the helper was not reaped";
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SupervisorEgressAnyTest, ::testing::Values(uid_t{0}, kNobody),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("root") : std::string("nobody");
                         });

}  // namespace
}  // namespace oarbank
