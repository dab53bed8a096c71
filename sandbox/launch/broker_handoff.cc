#include "sandbox/launch/broker_handoff.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace oarbank {

Expected<int> ConnectBroker(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Error{"broker", path + ": path too long for a unix socket"};
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{"broker", std::string("socket: ") + strerror(errno)};
  int rc;
  do rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return Error{"broker", "connect " + path + ": " + strerror(err)};
  }
  return fd;
}

std::string BrokerEnvironmentValue(BrokerHandoff handoff, const std::string& path, int fd) {
  switch (handoff) {
    case BrokerHandoff::kNone: return "";
    case BrokerHandoff::kInheritedFd: return "fd:" + std::to_string(fd);
    case BrokerHandoff::kPath: return "unix:" + path;
  }
  return "";
}

}  // namespace oarbank
