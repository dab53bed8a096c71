#include "sandbox/egress/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sandbox/common/unique_fd.h"
#include "sandbox/egress/proxy_impl.h"

namespace oarbank::egress {

asio::ip::address ToAsio(const IpAddress& ip) {
  if (ip.v4)
    return asio::ip::address_v4(asio::ip::address_v4::bytes_type{ip.bytes[0], ip.bytes[1], ip.bytes[2], ip.bytes[3]});
  asio::ip::address_v6::bytes_type b;
  std::copy(ip.bytes.begin(), ip.bytes.end(), b.begin());
  return asio::ip::address_v6(b);
}

const char* StatusText(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string Endpoint(const tcp::endpoint& ep) {
  return (ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string()) + ":" +
         std::to_string(ep.port());
}

std::string LogField(std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), kLogFieldBytes) + 24);
  size_t used = 0;
  for (; used < text.size() && out.size() < kLogFieldBytes; ++used) {
    const auto c = static_cast<unsigned char>(text[used]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (used < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::optional<std::vector<IpAddress>> OwnAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::vector<IpAddress> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    IpAddress local;
    if (a->ifa_addr->sa_family == AF_INET) {
      local.v4 = true;
      memcpy(local.bytes.data(), &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, 4);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      local.v4 = false;
      memcpy(local.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    out.push_back(local);
  }
  freeifaddrs(list);
  return out;
}

bool IsOwnAddress(const IpAddress& ip, const std::vector<IpAddress>& own) {
  IpAddress want = ip;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!ip.v4 && memcmp(ip.bytes.data(), kMapped, 12) == 0)
    want = Ipv4(ip.bytes[12], ip.bytes[13], ip.bytes[14], ip.bytes[15]);
  return std::find(own.begin(), own.end(), want) != own.end();
}

EgressProxy::EgressProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EgressProxy::~EgressProxy() { Stop(); }

namespace {

// The address an already-listening socket serves, or an Error naming why it
// cannot be served: not a socket, not TCP, not listening, not on loopback.
Expected<tcp::endpoint> ListeningEndpoint(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return Error{"listen", "the listener fd is not a stream socket"};
  len = sizeof listening;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
    return Error{"listen", "the listener fd is not listening"};
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0)
    return Error{"listen", "the listener fd has no address"};
  tcp::endpoint ep;
  if (addr.ss_family == AF_INET && addr_len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    asio::ip::address_v4::bytes_type b;
    memcpy(b.data(), &in->sin_addr, 4);
    ep = tcp::endpoint(asio::ip::address_v4(b), ntohs(in->sin_port));
  } else if (addr.ss_family == AF_INET6 && addr_len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    asio::ip::address_v6::bytes_type b;
    memcpy(b.data(), &in6->sin6_addr, 16);
    ep = tcp::endpoint(asio::ip::address_v6(b), ntohs(in6->sin6_port));
  } else {
    return Error{"listen", "the listener fd is not an IPv4 or IPv6 socket"};
  }
  return ep;
}

}  // namespace

Expected<std::unique_ptr<EgressProxy>> EgressProxy::Start(ProxyConfig config) {
  // The listener fd belongs to the proxy from here on, even when this fails.
  UniqueFd given(config.listen_fd);
  config.listen_fd = -1;
  std::optional<tcp::endpoint> given_ep;
  if (given.valid()) {
    auto ep = ListeningEndpoint(given.get());
    if (!ep.ok()) return ep.error();
    given_ep = ep.value();
    config.listen_address = given_ep->address().to_string();
    config.listen_port = given_ep->port();
  }
  const auto listen_ip = ParseIpAddress(config.listen_address);
  if (!listen_ip) return Error{"listen", "expected a loopback address, got " + config.listen_address};
  static const Cidr v4_loopback = ParseCidr("127.0.0.0/8").value();
  if (!(InCidr(*listen_ip, v4_loopback) || (*listen_ip == *ParseIpAddress("::1"))))
    return Error{"listen", "the proxy listens on loopback only (127.0.0.0/8 or ::1), got " + config.listen_address};
  if (config.allow.empty()) return Error{"allow", "expected at least one host[:port]"};
  if (config.max_connections == 0 || config.max_connections_per_client == 0 || config.max_header_bytes < 64)
    return Error{"limits", "limits too small"};
  if (!config.resolver) config.resolver = MakeSystemResolver();

  // The threads start with SIGPIPE blocked (they inherit this thread's mask).
  sigset_t pipe_only, before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  struct RestoreMask {
    sigset_t mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{before};

  auto impl = std::make_unique<Impl>(std::move(config));
  asio::error_code ec;
  if (given_ep) {
    const int fd = given.Release();
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    impl->acceptor.assign(given_ep->protocol(), fd, ec);
    if (ec) {
      close(fd);
      return Error{"listen", "cannot serve the listener fd: " + ec.message()};
    }
  } else {
    const tcp::endpoint ep(ToAsio(*listen_ip), impl->config.listen_port);
    impl->acceptor.open(ep.protocol(), ec);
    if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) impl->acceptor.bind(ep, ec);
    if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Error{"listen", "cannot listen on " + Endpoint(ep) + ": " + ec.message()};
  }
  impl->Accept();
  Impl* raw = impl.get();
  impl->loop = std::thread([raw] {
    for (;;) {
      try {
        raw->io.run();
        return;
      } catch (const std::exception& e) {  // never expected; keep serving rather than die
        raw->Log({{"event", "egress_internal_error"}, {"error", e.what()}});
      }
    }
  });
  return std::unique_ptr<EgressProxy>(new EgressProxy(std::move(impl)));
}

uint16_t EgressProxy::port() const {
  asio::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

std::string EgressProxy::address() const { return impl_->config.listen_address; }

void EgressProxy::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->gate->Close();  // no resolver answer reaches the loop from here on
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->stopped = true;
    asio::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_backoff.cancel();
  });
  impl_->io.stop();
  if (impl_->loop.joinable()) impl_->loop.join();
  impl_->stopped = true;
  impl_->FlushRefusalCounts();
  // The loop may have stopped before the posted close ran: no connection
  // may queue on a listener nobody accepts from any more.
  asio::error_code ignored;
  impl_->acceptor.close(ignored);
}

}  // namespace oarbank::egress
