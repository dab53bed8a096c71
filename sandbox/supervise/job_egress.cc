#include "sandbox/supervise/job_egress.h"
#include "sandbox/common/send_fd.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace oarbank {
namespace {

// A fresh network namespace has `lo` down and no address on it until it
// is up; 127.0.0.1 and ::1 appear when it is. `fd`: any socket of it.
int LoopbackUp(int fd, const char** what) {
  ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, "lo", 3);
  *what = "ioctl(lo, SIOCGIFFLAGS)";
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) return errno;
  *what = "ioctl(lo, SIOCSIFFLAGS IFF_UP)";
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) return errno;
  return 0;
}

}  // namespace

int BringUpLoopbackInChild(const char** what) {
  *what = "socket(AF_INET, SOCK_DGRAM) for ioctl";
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int err = LoopbackUp(fd, what);
  close(fd);
  return err;
}

int OpenProxyListenerInChild(uint16_t port, const char** what) {
  *what = "socket(AF_INET, SOCK_STREAM)";
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int err = LoopbackUp(fd, what);
  if (err == 0) {
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *what = "bind 127.0.0.1:<net.proxy_port>";
    if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) err = errno;
  }
  if (err == 0) {
    *what = "listen";
    if (listen(fd, SOMAXCONN) != 0) err = errno;
  }
  if (err != 0) {
    close(fd);
    return -err;
  }
  return fd;
}

int SendListenerInChild(int channel, int fd) { return SendFd(channel, 'L', fd); }

Expected<int> ReceiveListenerFromChild(int channel, std::chrono::milliseconds timeout) {
  pollfd p{channel, POLLIN, 0};
  int ready;
  do ready = poll(&p, 1, static_cast<int>(std::max<long long>(0, timeout.count())));
  while (ready < 0 && errno == EINTR);
  if (ready < 0) return Error{"egress", std::string("poll the listener channel: ") + strerror(errno)};
  if (ready == 0) return Error{"egress", "the job's proxy listener did not arrive in time"};
  char tag = 0;
  iovec iov{&tag, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) return Error{"egress", std::string("receive the job's proxy listener: ") + strerror(errno)};
  // Take every fd that came, so none is left open here by mistake.
  int fds[4];
  int count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && count < 4; ++i) memcpy(&fds[count++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  if (n == 1 && tag == 'L' && count == 1 && !(msg.msg_flags & MSG_CTRUNC)) return fds[0];
  for (int i = 0; i < count; ++i) close(fds[i]);
  return Error{"egress", n == 0 ? "the job's init ended before it sent the proxy listener"
                                : "unexpected message on the listener channel"};
}

Expected<std::unique_ptr<egress::EgressProxy>> ServeJobEgress(const std::vector<std::string>& allow, int listener,
                                                              const JobEgressOptions& options) {
  egress::ProxyConfig config;
  config.listen_fd = listener;  // owned by the proxy from here, even on an error
  for (const auto& text : allow) {
    auto entry = egress::ParseAllowEntry(text);
    if (!entry.ok()) {
      close(listener);
      return Error{"net.allow", text + ": " + entry.error().what};
    }
    config.allow.push_back(entry.value());
  }
  config.test_public = options.test_public;
  config.resolver = options.resolver;
  config.log = options.log;
  config.max_connections = options.max_connections;
  config.max_connections_per_client = options.max_connections;
  return egress::EgressProxy::Start(std::move(config));
}

}  // namespace oarbank
