// One client connection of the egress proxy: its request read and judged
// (the allowlist, the address classes, the host's own addresses), the
// upstream connection, and the tunnel relayed until either side ends.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/egress/proxy_impl.h"

namespace oarbank::egress {
namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(EgressProxy::Impl& proxy, tcp::socket client)
      : proxy_(proxy), client_(std::move(client)), upstream_(proxy.io), timer_(proxy.io) {
    asio::error_code ec;
    const auto ep = client_.remote_endpoint(ec);
    peer_ = ec ? "?" : Endpoint(ep);
    client_key_ = ec ? "?" : ep.address().to_string();
    client_.set_option(tcp::no_delay(true), ec);
  }
  ~Session() {
    proxy_.active--;
    std::lock_guard lock(proxy_.clients_mu);
    auto it = proxy_.per_client.find(client_key_);
    if (it != proxy_.per_client.end() && --it->second == 0) proxy_.per_client.erase(it);
  }

  // Counts this connection against its client's share; false when the
  // client already holds max_connections_per_client.
  bool TakeClientSlot() {
    std::lock_guard lock(proxy_.clients_mu);
    return ++proxy_.per_client[client_key_] <= proxy_.config.max_connections_per_client ||
           FaultSkipStep("proxy-connection-caps");
  }

  void Start() {
    head_.reserve(1024);
    ArmTimer(proxy_.config.header_timeout, [](Session& s) {
      s.Refuse(408,
               "no complete request head within " + std::to_string(s.proxy_.config.header_timeout.count()) + " ms");
    });
    ReadHead();
  }

  // Over the connection limit: answer 503 and close, without reading.
  void RefuseBusy() {
    Refuse(503, "too many connections (limit " + std::to_string(proxy_.config.max_connections) + ")");
  }
  void RefuseClientBusy() {
    Refuse(503, "too many connections from " + client_key_ + " (limit " +
                    std::to_string(proxy_.config.max_connections_per_client) + " a client)");
  }

 private:
  template <typename OnExpiry>
  void ArmTimer(std::chrono::milliseconds after, OnExpiry on_expiry) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), on_expiry](const asio::error_code& ec) {
      if (!ec && !self->closed_) on_expiry(*self);
    });
  }

  void ReadHead() {
    client_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
      if (self->closed_ || self->responding_) return;
      if (ec) return self->Close();  // the client left before finishing its head
      self->head_.append(self->chunk_.data(), n);
      const auto end = FindHeadEnd(self->head_);
      const bool unbounded = FaultSkipStep("proxy-head-limit");
      if (end && (*end <= self->proxy_.config.max_header_bytes || unbounded)) return self->HandleHead(*end);
      if (self->head_.size() > self->proxy_.config.max_header_bytes && !unbounded)
        return self->Refuse(
            431, "request head larger than " + std::to_string(self->proxy_.config.max_header_bytes) + " bytes");
      self->ReadHead();
    });
  }

  void HandleHead(size_t end) {
    auto parsed = ParseProxyRequest(std::string_view(head_).substr(0, end));
    rest_ = head_.substr(end);
    head_.resize(end);
    if (!parsed.ok()) return Refuse(400, parsed.error().what);
    req_ = std::move(parsed).value();
    method_ = req_.method;
    raw_host_ = req_.host;
    port_ = req_.port;
    // FaultSkipStep: the test-only agent's mutation points (common/fault_hooks.h).
    auto host = NormalizeRequestHost(req_.host);
    if (!host.ok() && !FaultSkipStep("proxy-host-names")) return Refuse(403, host.error().what);
    if (host.ok()) req_.host = host.value();
    if (!ListAdmits(proxy_.config.allow, req_.host, req_.port) && !FaultSkipStep("proxy-allowlist"))
      return Refuse(403, req_.host + ":" + std::to_string(req_.port) + " is not in the allowlist");
    if (req_.kind == RequestKind::kPlainHttp && req_.transfer_encoding)
      return Refuse(501, "Transfer-Encoding request bodies are not proxied over plain HTTP (use CONNECT)");
    body_left_ = req_.kind == RequestKind::kPlainHttp ? req_.content_length.value_or(0) : 0;
    if (auto entry = proxy_.OverWildcardRate(req_.host, req_.port); entry && !FaultSkipStep("proxy-wildcard-rate")) {
      char rate[32];
      snprintf(rate, sizeof rate, "%g", proxy_.config.wildcard_lookups_per_second);
      return Refuse(429, "too many lookups under " + *entry + " (limit " + rate + " a second)");
    }

    // The one lookup, asynchronous (the resolver never blocks this loop nor
    // another lookup); the request is answered 502 if it takes too long.
    // The timer holds the session meanwhile; the answer only a weak
    // reference, and it is dropped once the proxy has stopped.
    ArmTimer(proxy_.config.connect_timeout, [](Session& s) {
      s.Refuse(502, "no answer for " + s.req_.host + " within " +
                        std::to_string(s.proxy_.config.connect_timeout.count()) + " ms");
    });
    std::weak_ptr<Session> weak = shared_from_this();
    proxy_.config.resolver->Resolve(req_.host, [weak, gate = proxy_.gate](Resolver::Answer answer) {
      gate->Post([weak, answer = std::move(answer)]() mutable {
        if (auto self = weak.lock()) self->OnResolved(std::move(answer));
      });
    });
  }

  void OnResolved(Expected<std::vector<IpAddress>> answer) {
    if (closed_ || responding_) return;
    if (!answer.ok()) return Refuse(502, req_.host + ": " + answer.error().what);
    for (const auto& ip : answer.value()) {
      if (auto why = NonPublicReason(ip, proxy_.config.test_public); why && !FaultSkipStep("proxy-public-only"))
        return Refuse(403, req_.host + " resolves to " + ip.ToString() + ", " + *why);
    }
    // An address of the proxy's own host reaches its services, whatever
    // range it is in: refused like loopback (and when the host's addresses
    // cannot be read, every answer is).
    const auto own = OwnAddresses();
    if (!own) return Refuse(403, "cannot read this host's addresses to check " + req_.host + " against them");
    for (const auto& ip : answer.value()) {
      if (IsOwnAddress(ip, *own) && !FaultSkipStep("proxy-own-host"))
        return Refuse(403, req_.host + " resolves to " + ip.ToString() + ", an address of the proxy's own host");
    }
    addresses_ = std::move(answer).value();
    ArmTimer(proxy_.config.connect_timeout, [](Session& s) {
      s.Refuse(502, "no connection to " + s.req_.host + ":" + std::to_string(s.req_.port) + " within " +
                        std::to_string(s.proxy_.config.connect_timeout.count()) + " ms");
    });
    ConnectNext(0);
  }

  // Tries the checked addresses in order; never anything else.
  void ConnectNext(size_t i) {
    if (i >= addresses_.size())
      return Refuse(502, "cannot connect to " + req_.host + ":" + std::to_string(req_.port) + ": " + last_error_);
    asio::error_code ignored;
    upstream_.close(ignored);
    const tcp::endpoint ep(ToAsio(addresses_[i]), req_.port);
    upstream_.async_connect(ep, [self = shared_from_this(), i, ep](const asio::error_code& ec) {
      if (self->closed_ || self->responding_) return;
      if (ec) {
        self->last_error_ = ec.message();
        return self->ConnectNext(i + 1);
      }
      asio::error_code e;
      self->upstream_.set_option(tcp::no_delay(true), e);
      self->connected_to_ = Endpoint(ep);
      self->OnConnected();
    });
  }

  void OnConnected() {
    nlohmann::ordered_json event = {{"event", "egress_connect"}, {"client", peer_},   {"method", method_},
                                    {"host", req_.host},         {"port", req_.port}, {"address", connected_to_}};
    proxy_.Log(std::move(event));
    std::string first;
    if (req_.kind == RequestKind::kConnect) {
      greeting_ = "HTTP/1.1 200 Connection established\r\n\r\n";
      first = std::move(rest_);  // bytes the client sent early belong to the tunnel
    } else {
      first = UpstreamHead(req_);
      const size_t body = static_cast<size_t>(std::min<uint64_t>(body_left_, rest_.size()));
      first.append(rest_, 0, body);
      body_left_ -= body;
    }
    rest_.clear();
    last_activity_ = Clock::now();
    ArmIdle();
    auto self = shared_from_this();
    auto start_pumps = [self] { self->StartRelay(); };
    auto send_first = [self, start_pumps, first = std::move(first)]() mutable {
      if (first.empty()) return start_pumps();
      self->pending_ = std::move(first);
      asio::async_write(self->upstream_, asio::buffer(self->pending_),
                        [self, start_pumps](const asio::error_code& ec, size_t) {
                          if (self->closed_) return;
                          if (ec) return self->Close();
                          start_pumps();
                        });
    };
    if (greeting_.empty()) return send_first();
    asio::async_write(client_, asio::buffer(greeting_), [self, send_first](const asio::error_code& ec, size_t) mutable {
      if (self->closed_) return;
      if (ec) return self->Close();
      send_first();
    });
  }

  enum class Direction { kToUpstream, kToClient };

  // Relays both directions: splice(2) through a pipe per direction (no copy
  // into user space), or read/write through a buffer when no pipe can be had
  // (out of file descriptors).
  void StartRelay() {
    if (c2u_pipe_.Open() && u2c_pipe_.Open()) {
      asio::error_code ec;
      client_.non_blocking(true, ec);
      if (!ec) upstream_.non_blocking(true, ec);
      if (!ec) {
        Splice(client_, upstream_, c2u_pipe_, Direction::kToUpstream);
        Splice(upstream_, client_, u2c_pipe_, Direction::kToClient);
        return;
      }
    }
    Pump(client_, upstream_, c2u_, Direction::kToUpstream);
    Pump(upstream_, client_, u2c_, Direction::kToClient);
  }

  // One direction reached EOF: pass the half-close on; a tunnel ends when
  // both sides did, a plain HTTP exchange when the server's answer ended.
  void OnEof(tcp::socket& to, Direction dir) {
    if (req_.kind == RequestKind::kPlainHttp) {
      if (dir == Direction::kToClient) Close();
      return;  // the client half-closed after its body: keep reading the answer
    }
    asio::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    if (++eofs_ == 2) Close();
  }

  struct SplicePipe {
    int r = -1, w = -1;
    size_t held = 0;  // bytes in the pipe not yet written out
    bool Open() {
      int fds[2];
      if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
      r = fds[0];
      w = fds[1];
      (void)fcntl(w, F_SETPIPE_SZ, kSplicePipeSize);  // a larger pipe if allowed; 64 KiB otherwise
      return true;
    }
    ~SplicePipe() {
      if (r >= 0) close(r);
      if (w >= 0) close(w);
    }
  };

  void Splice(tcp::socket& from, tcp::socket& to, SplicePipe& pipe, Direction dir) {
    const bool limited = req_.kind == RequestKind::kPlainHttp && dir == Direction::kToUpstream;
    auto self = shared_from_this();
    auto resume = [self, &from, &to, &pipe, dir](const asio::error_code& ec) {
      if (self->closed_) return;
      if (ec) return self->Close();
      self->Splice(from, to, pipe, dir);
    };
    // A bounded number of moves per turn, so one busy tunnel cannot starve
    // the others on the event loop.
    for (int turn = 0; turn < 32; ++turn) {
      if (closed_) return;
      if (pipe.held > 0) {
        const ssize_t n =
            splice(pipe.r, nullptr, to.native_handle(), nullptr, pipe.held, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
          pipe.held -= static_cast<size_t>(n);
          last_activity_ = Clock::now();
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return to.async_wait(tcp::socket::wait_write, resume);
        return Close();
      }
      size_t want = kSpliceChunk;
      if (limited) {
        if (body_left_ == 0) return;  // the declared body and nothing after it
        want = static_cast<size_t>(std::min<uint64_t>(want, body_left_));
      }
      const ssize_t n = splice(from.native_handle(), nullptr, pipe.w, nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        pipe.held = static_cast<size_t>(n);
        if (limited) body_left_ -= static_cast<uint64_t>(n);
        last_activity_ = Clock::now();
        continue;
      }
      if (n == 0) return OnEof(to, dir);
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return from.async_wait(tcp::socket::wait_read, resume);
      return Close();
    }
    asio::post(proxy_.io, [resume] { resume({}); });
  }

  void Pump(tcp::socket& from, tcp::socket& to, std::array<char, kRelayBuffer>& buf, Direction dir) {
    const bool plain = req_.kind == RequestKind::kPlainHttp;
    size_t want = buf.size();
    if (plain && dir == Direction::kToUpstream) {
      // Plain HTTP: the declared body and nothing after it.
      if (body_left_ == 0) return;
      want = static_cast<size_t>(std::min<uint64_t>(want, body_left_));
    }
    from.async_read_some(asio::buffer(buf.data(), want), [self = shared_from_this(), &from, &to, &buf, dir, plain](
                                                             const asio::error_code& ec, size_t n) {
      if (self->closed_) return;
      if (ec) {
        if (ec != asio::error::eof) return self->Close();
        return self->OnEof(to, dir);
      }
      self->last_activity_ = Clock::now();
      if (plain && dir == Direction::kToUpstream) self->body_left_ -= n;
      asio::async_write(to, asio::buffer(buf.data(), n),
                        [self, &from, &to, &buf, dir](const asio::error_code& wec, size_t) {
                          if (self->closed_) return;
                          if (wec) return self->Close();
                          self->last_activity_ = Clock::now();
                          self->Pump(from, to, buf, dir);
                        });
    });
  }

  void ArmIdle() {
    const auto deadline = last_activity_ + proxy_.config.idle_timeout;
    timer_.expires_at(deadline);
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec || self->closed_) return;
      if (Clock::now() - self->last_activity_ >= self->proxy_.config.idle_timeout) {
        self->proxy_.Log({{"event", "egress_idle_close"},
                          {"client", self->peer_},
                          {"host", self->req_.host},
                          {"port", self->req_.port},
                          {"idle_ms", self->proxy_.config.idle_timeout.count()}});
        return self->Close();
      }
      self->ArmIdle();
    });
  }

  // Answers `status` with a one-line reason, logs one JSON line, closes.
  void Refuse(int status, const std::string& reason) {
    if (closed_ || responding_) return;
    responding_ = true;
    asio::error_code ignored;
    upstream_.close(ignored);
    timer_.cancel();
    nlohmann::ordered_json event = {{"event", "egress_refused"}, {"client", peer_}, {"status", status}};
    if (!method_.empty()) event["method"] = method_;
    if (!raw_host_.empty()) event["host"] = raw_host_;
    if (port_ != 0) event["port"] = port_;
    event["reason"] = reason;
    proxy_.LogRefusal(client_key_, std::move(event));
    const std::string body = "egress: " + reason + "\n";
    pending_ = "HTTP/1.1 " + std::to_string(status) + " " + StatusText(status) +
               "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n\r\n" + body;
    // The write gets its own short deadline: a client that never reads must
    // not hold the connection.
    timer_.expires_after(std::chrono::seconds(5));
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec) self->Close();
    });
    asio::async_write(client_, asio::buffer(pending_), [self = shared_from_this()](const asio::error_code&, size_t) {
      asio::error_code e;
      self->client_.shutdown(tcp::socket::shutdown_send, e);
      self->Close();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    timer_.cancel();
    client_.close(ignored);
    upstream_.close(ignored);
  }

  EgressProxy::Impl& proxy_;
  tcp::socket client_;
  tcp::socket upstream_;
  asio::steady_timer timer_;
  std::string peer_, client_key_;
  std::string head_, rest_, pending_, greeting_;
  std::array<char, 4096> chunk_{};
  ProxyRequest req_;
  std::string method_, raw_host_;
  uint16_t port_ = 0;
  uint64_t body_left_ = 0;
  std::vector<IpAddress> addresses_;
  std::string last_error_ = "no address";
  std::string connected_to_;
  std::array<char, kRelayBuffer> c2u_{}, u2c_{};
  SplicePipe c2u_pipe_, u2c_pipe_;
  Clock::time_point last_activity_{};
  int eofs_ = 0;
  bool responding_ = false;
  bool closed_ = false;
};

}  // namespace

void EgressProxy::Impl::Accept() {
  acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (stopped) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      // EMFILE and friends: log, back off briefly, keep serving.
      Log({{"event", "egress_accept_error"}, {"error", ec.message()}});
      accept_backoff.expires_after(std::chrono::milliseconds(50));
      accept_backoff.async_wait([this](const asio::error_code& e) {
        if (!e && !stopped) Accept();
      });
      return;
    }
    const size_t now = ++active;
    auto session = std::make_shared<Session>(*this, std::move(socket));
    const bool client_ok = session->TakeClientSlot();
    if (now > config.max_connections && !FaultSkipStep("proxy-connection-caps"))
      session->RefuseBusy();
    else if (!client_ok)
      session->RefuseClientBusy();
    else
      session->Start();
    Accept();
  });
}

}  // namespace oarbank::egress
