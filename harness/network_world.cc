#include "harness/network_world.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "harness/world.h"
#include "sandbox/common/subprocess.h"

namespace oarbank {
namespace {

constexpr char kUpVeth[] = "battery-up";
constexpr char kPubVeth[] = "battery-pub";
constexpr char kPubVeth4[] = "198.18.0.2";
constexpr char kPubVeth6[] = "fd99::2";

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

const char* IpTool() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(path, X_OK) == 0) return path;
  return nullptr;
}

// `ip -batch -` fed `script`, in the network namespace `netns` (-1: this
// process's). "" when it succeeded, else ip's first line of complaint.
std::string RunIp(const char* ip, const std::string& script, int netns) {
  SubprocessSpec spec;
  spec.argv = {ip, "-batch", "-"};
  spec.input = script;
  if (netns >= 0) spec.namespaces = {{netns, CLONE_NEWNET}};
  CaptureLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const CapturedRun run = RunCaptured(spec, limits);
  if (!run.started) return run.error;
  if (run.ExitCode() == 0) return "";
  const std::string said = run.err.empty() ? run.out : run.err;
  const std::string first = said.substr(0, said.find('\n'));
  const std::string how = run.timed_out ? "no answer in 30 s" : "exit " + std::to_string(run.ExitCode());
  return std::string(ip) + " -batch: " + (first.empty() ? how : first);
}

// A child holding a fresh network namespace until `release` is closed:
// `ip` names a namespace by a pid (or by a name in /run/netns, which would
// outlive the battery if it died).
struct Holder {
  pid_t pid = -1;
  UniqueFd release;
  ~Holder() {
    release.Reset();
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
};

Expected<pid_t> StartHolder(Holder& holder) {
  int ready[2], release[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Error{"network world", Errno("pipe")};
  if (pipe2(release, O_CLOEXEC) != 0) {
    close(ready[0]);
    close(ready[1]);
    return Error{"network world", Errno("pipe")};
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    close(release[1]);
    char c = unshare(CLONE_NEWNET) == 0 ? 'r' : 'e';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    while (read(release[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(ready[1]);
  close(release[0]);
  holder.release.Reset(release[1]);
  holder.pid = pid;
  char c = 0;
  const bool ok = pid > 0 && read(ready[0], &c, 1) == 1 && c == 'r';
  close(ready[0]);
  if (!ok) return Error{"network world", pid < 0 ? Errno("fork") : "unshare(CLONE_NEWNET) failed in the holder"};
  return pid;
}

// The public hosts' server, in pub: every TCP connection gets
// "HELLO <its first line>", every datagram "ECHO <its first line>", so a
// probe knows it got through (through a user-mode stack, what it sent may
// still be on its way when it exits: the answer is the proof).
pid_t StartPublicServer(int pub_ns, std::string& error) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    error = Errno("pipe");
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) {
    close(ready[1]);
    char c = 0;
    const bool ok = pid > 0 && read(ready[0], &c, 1) == 1 && c == 'r';
    close(ready[0]);
    if (!ok) {
      error = pid < 0 ? Errno("fork") : "the public hosts' server did not start";
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      return -1;
    }
    return pid;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  // Only its ready pipe stays (as fd 3): it must not hold the harness's
  // sockets and pipes open.
  if (setns(pub_ns, CLONE_NEWNET) != 0 || dup2(ready[1], 3) != 3) _exit(1);
  syscall(SYS_close_range, 4, ~0u, 0);
  std::vector<pollfd> fds;
  for (const char* address : {kPublic4, kPublic6})
    for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
      sockaddr_storage ss{};
      socklen_t len = 0;
      if (!ParseSocketAddress(address, kEgressPort, ss, len)) _exit(1);
      const int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) _exit(1);
      if (type == SOCK_STREAM && listen(fd, 64) != 0) _exit(1);
      fds.push_back({fd, POLLIN, 0});
    }
  if (write(3, "r", 1) != 1) _exit(1);
  close(3);
  auto answer = [](const char* greeting, const char* buf, ssize_t n) {
    std::string said(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return std::string(greeting) + " " + said.substr(0, said.find('\n')) + "\n";
  };
  char buf[256];
  for (;;) {
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    for (auto& p : fds) {
      if (!(p.revents & POLLIN)) continue;
      int type = 0;
      socklen_t tlen = sizeof type;
      getsockopt(p.fd, SOL_SOCKET, SO_TYPE, &type, &tlen);
      if (type == SOCK_DGRAM) {
        sockaddr_storage from{};
        socklen_t flen = sizeof from;
        const ssize_t n = recvfrom(p.fd, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &flen);
        if (n < 0) continue;
        const std::string reply = answer("ECHO", buf, n);
        sendto(p.fd, reply.data(), reply.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), flen);
        continue;
      }
      const int c = accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) continue;
      pollfd in = {c, POLLIN, 0};
      const ssize_t n = poll(&in, 1, 500) == 1 ? recv(c, buf, sizeof buf, MSG_DONTWAIT) : 0;
      const std::string reply = answer("HELLO", buf, n);
      send(c, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close(c);
    }
  }
}

// /dev/net/tun usable by every uid, as Debian's udev rule makes it: a
// 0666 node of the same device bound over it in this mount namespace.
std::string StandInTun(const std::string& dir) {
  struct stat st {};
  if (stat("/dev/net/tun", &st) != 0) return "";  // no tun: the stack cannot start, as it would not anyway
  if ((st.st_mode & 0666) == 0666) return "";
  const std::string node = dir + "/tun";
  if (mknod(node.c_str(), S_IFCHR | 0666, st.st_rdev) != 0) return Errno("tun stand-in: mknod " + node);
  chmod(node.c_str(), 0666);
  if (mount(node.c_str(), "/dev/net/tun", nullptr, MS_BIND, nullptr) != 0)
    return Errno("tun stand-in: bind over /dev/net/tun");
  return "";
}

}  // namespace

const std::vector<Decoy>& Decoys4() {
  static const std::vector<Decoy> decoys = {
      {"10.77.0.2", "private (10.0.0.0/8)"},
      {"172.16.77.2", "private (172.16.0.0/12)"},
      {"192.168.77.2", "private (192.168.0.0/16)"},
      {"100.64.77.2", "shared address space (100.64.0.0/10)"},
      {"169.254.169.254", "link-local: the cloud metadata address"},
      {"192.0.2.77", "documentation (192.0.2.0/24)"},
      {"192.0.0.77", "IETF protocol assignments (192.0.0.0/24)"},
      {"198.18.0.3", "benchmarking (198.18.0.0/15) outside the declared public range"},
  };
  return decoys;
}

const std::vector<Decoy>& Decoys6() {
  static const std::vector<Decoy> decoys = {
      {"fd77::2", "unique local (fc00::/7)"},
      {"2001:db8::77", "documentation (2001:db8::/32)"},
      {"2002:a4d:2::1", "6to4 of a private address (10.77.0.2)"},
      {"64:ff9b::a4d:2", "NAT64 of a private address (10.77.0.2)"},
      {"2001::77", "Teredo (2001::/32)"},
      {"fec0::77", "site-local (fec0::/10)"},
  };
  return decoys;
}

NetworkWorld::~NetworkWorld() {
  if (public_server > 0) {
    kill(public_server, SIGKILL);
    waitpid(public_server, nullptr, 0);
  }
}

namespace {

Expected<std::unique_ptr<NetworkWorld>> Build(Listeners& listeners, const std::string& stand_in_dir) {
  const char* ip = IpTool();
  if (ip == nullptr) return Error{"network world", "iproute2's ip is not installed"};
  auto net = std::make_unique<NetworkWorld>();
  // Held until the links are made: a fork after this would inherit its pipe.
  auto holder = std::make_unique<Holder>();
  auto pid = StartHolder(*holder);
  if (!pid.ok()) return pid.error();
  const std::string pid_text = std::to_string(pid.value());
  net->pub.Reset(open(("/proc/" + pid_text + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
  if (!net->pub.valid()) return Error{"network world", Errno("open the pub namespace")};
  if (unshare(CLONE_NEWNET) != 0) return Error{"network world", Errno("unshare(CLONE_NEWNET)")};
  const UniqueFd up(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!up.valid()) return Error{"network world", Errno("open the up namespace")};

  std::string up_links = "link set lo up\n";
  up_links += std::string("link add ") + kUpVeth + " type veth peer name " + kPubVeth + " netns " + pid_text + "\n";
  up_links += std::string("addr add ") + kHost4 + "/24 dev " + kUpVeth + "\n";
  up_links += std::string("addr add ") + kHost6 + "/64 dev " + kUpVeth + " nodad\n";
  up_links += std::string("link set ") + kUpVeth + " up\n";
  // The host's own addresses inside the declared public range: only the
  // ruleset's host-address rule keeps a job from them.
  up_links += std::string("addr add ") + kHostPublic4 + "/32 dev lo\n";
  up_links += std::string("addr add ") + kHostPublic6 + "/128 dev lo nodad\n";
  std::string pub = "link set lo up\n";
  pub += std::string("addr add ") + kPubVeth4 + "/24 dev " + kPubVeth + "\n";
  pub += std::string("addr add ") + kPubVeth6 + "/64 dev " + kPubVeth + " nodad\n";
  pub += std::string("link set ") + kPubVeth + " up\n";
  pub += std::string("addr add ") + kPublic4 + "/32 dev lo\n";
  pub += std::string("addr add ") + kPublic6 + "/128 dev lo nodad\n";
  for (const auto& d : Decoys4()) pub += std::string("addr add ") + d.address + "/32 dev lo\n";
  for (const auto& d : Decoys6()) pub += std::string("addr add ") + d.address + "/128 dev lo nodad\n";
  const std::string up_routes =
      std::string("route add default via ") + kPubVeth4 + "\nroute add ::/0 via " + kPubVeth6 + "\n";
  for (const auto& [script, ns] : {std::pair{up_links, -1}, {pub, net->pub.get()}, {up_routes, -1}})
    if (auto failed = RunIp(ip, script, ns); !failed.empty()) return Error{"network world", failed};
  holder.reset();

  // The decoys, in pub: what reaches one is evidence.
  if (setns(net->pub.get(), CLONE_NEWNET) != 0) return Error{"network world", Errno("setns into pub")};
  std::string failed;
  for (const auto* decoys : {&Decoys4(), &Decoys6()})
    for (const auto& d : *decoys)
      for (int type : {SOCK_STREAM, SOCK_DGRAM})
        if (failed.empty() && listeners.AddAt(std::string("decoy ") + d.address, d.address, kEgressPort, type) < 0)
          failed = Errno(std::string("decoy listener ") + d.address);
  if (setns(up.get(), CLONE_NEWNET) != 0) return Error{"network world", Errno("setns back into up")};
  if (!failed.empty()) return Error{"network world", failed};
  // The host's own sockets, in up: its loopback and its own addresses.
  for (const char* address : {"127.0.0.1", "::1", kHost4, kHost6, kHostPublic4, kHostPublic6})
    for (int type : {SOCK_STREAM, SOCK_DGRAM})
      if (listeners.AddAt(std::string("host ") + address, address, kEgressPort, type) < 0)
        return Error{"network world", Errno(std::string("host listener ") + address)};
  net->public_server = StartPublicServer(net->pub.get(), failed);
  if (net->public_server < 0) return Error{"network world", failed};
  if (auto tun = StandInTun(stand_in_dir); !tun.empty()) return Error{"network world", tun};
  return net;
}

}  // namespace

Expected<std::unique_ptr<NetworkWorld>> EnterNetworkWorld(Listeners& listeners, const std::string& stand_in_dir) {
  const UniqueFd original(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!original.valid()) return Error{"network world", Errno("open this process's network namespace")};
  auto net = Build(listeners, stand_in_dir);
  // Failed: back where it started, so the rest of the world is built there.
  if (!net.ok() && setns(original.get(), CLONE_NEWNET) != 0)
    return Error{"network world",
                 Errno("setns back into the original network namespace") + " (after: " + net.error().what + ")"};
  return net;
}

}  // namespace oarbank
