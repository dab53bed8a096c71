#include "sandbox/egress/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include <asio.hpp>
#include <nlohmann/json.hpp>

#include "sandbox/egress/request.h"

namespace oarbank::egress {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kRelayBuffer = 64 * 1024;
constexpr size_t kSpliceChunk = 1024 * 1024;
constexpr int kSplicePipeSize = 1024 * 1024;
constexpr size_t kLogFieldBytes = 256;
// Refusal lines per client address: a burst, then a steady rate; what is
// over it is counted and the count logged with the client's next line (or
// when the proxy stops).
constexpr double kRefusalBurst = 50;
constexpr double kRefusalsPerSecond = 5;
constexpr size_t kMaxTrackedClients = 4096;

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

// A log field as written: printable ASCII kept (JSON escapes quotes and
// backslashes), every other byte as \xNN, and at most kLogFieldBytes of the
// text kept, with the length of what was cut.
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

// The addresses of every interface in this network namespace, or nullopt
// when they cannot be read. Read at every check: an address added a moment
// ago counts.
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

// Whether `ip`, or the IPv4 address an IPv4-mapped `ip` carries, is one of `own`.
bool IsOwnAddress(const IpAddress& ip, const std::vector<IpAddress>& own) {
  IpAddress want = ip;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!ip.v4 && memcmp(ip.bytes.data(), kMapped, 12) == 0)
    want = Ipv4(ip.bytes[12], ip.bytes[13], ip.bytes[14], ip.bytes[15]);
  return std::find(own.begin(), own.end(), want) != own.end();
}

}  // namespace

// Where a resolver's answer goes: posted to the proxy's loop while it runs,
// dropped once it stopped (a resolver may answer after the proxy is gone).
struct ResolveGate {
  std::mutex mu;
  asio::io_context* io = nullptr;
  template <typename F>
  void Post(F f) {
    std::lock_guard lock(mu);
    if (io != nullptr) asio::post(*io, std::move(f));
  }
  void Close() {
    std::lock_guard lock(mu);
    io = nullptr;
  }
};

struct EgressProxy::Impl {
  // Declared before io: sessions still queued in io are destroyed with it
  // and count themselves out of `active` and `per_client`, so these must
  // outlive io.
  ProxyConfig config;
  std::atomic<size_t> active{0};
  std::mutex clients_mu;
  std::map<std::string, size_t> per_client;  // open connections by client address
  std::mutex log_mu;
  struct RefusalBudget {
    double tokens = kRefusalBurst;
    Clock::time_point last = Clock::now();
    uint64_t dropped = 0;
  };
  std::map<std::string, RefusalBudget> refusal_budget;  // under log_mu
  struct LookupBudget {
    double tokens = 0;
    Clock::time_point last{};
  };
  std::map<size_t, LookupBudget> wildcard_budget;  // by index in config.allow; the loop's alone
  std::atomic<bool> stopped{false};
  std::shared_ptr<ResolveGate> gate = std::make_shared<ResolveGate>();
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_backoff{io};
  std::thread loop;

  explicit Impl(ProxyConfig c) : config(std::move(c)) { gate->io = &io; }

  // Every string field cut and escaped (LogField), so no line is longer
  // than a fixed bound whatever a client sends.
  void Log(nlohmann::ordered_json event) {
    for (auto& [key, value] : event.items())
      if (value.is_string()) value = LogField(value.get_ref<const std::string&>());
    const std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::lock_guard lock(log_mu);
    Write(line);
  }

  // A refusal's line, within the client's budget; over it, only counted.
  void LogRefusal(const std::string& client, nlohmann::ordered_json event) {
    {
      std::lock_guard lock(log_mu);
      if (refusal_budget.size() >= kMaxTrackedClients && !refusal_budget.count(client)) {
        // Forget clients whose budget is full and who owe no count.
        for (auto it = refusal_budget.begin(); it != refusal_budget.end();) {
          const double secs = std::chrono::duration<double>(Clock::now() - it->second.last).count();
          if (it->second.dropped == 0 && it->second.tokens + secs * kRefusalsPerSecond >= kRefusalBurst)
            it = refusal_budget.erase(it);
          else
            ++it;
        }
      }
      auto& b = refusal_budget[client];
      const auto now = Clock::now();
      b.tokens =
          std::min(kRefusalBurst, b.tokens + std::chrono::duration<double>(now - b.last).count() * kRefusalsPerSecond);
      b.last = now;
      if (b.tokens < 1 || refusal_budget.size() > kMaxTrackedClients) {
        ++b.dropped;
        return;
      }
      b.tokens -= 1;
      if (b.dropped > 0) {
        event["dropped_before"] = b.dropped;  // refusals from this client not logged since its last line
        b.dropped = 0;
      }
    }
    Log(std::move(event));
  }

  // The counts still owed, one line per client (the proxy is stopping).
  void FlushRefusalCounts() {
    std::lock_guard lock(log_mu);
    for (auto& [client, b] : refusal_budget) {
      if (b.dropped == 0) continue;
      nlohmann::ordered_json event = {
          {"event", "egress_refusals_dropped"}, {"client", LogField(client)}, {"dropped", b.dropped}};
      Write(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      b.dropped = 0;
    }
  }

  void Write(const std::string& line) {
    if (config.log) {
      config.log(line);
    } else {
      fprintf(stderr, "%s\n", line.c_str());
      fflush(stderr);
    }
  }

  // Whether a lookup of `host` (admitted by the list) is within the rate of
  // the wildcard entry admitting it; nullopt if so, else the entry.
  std::optional<std::string> OverWildcardRate(const std::string& host, uint16_t port) {
    const double rate = config.wildcard_lookups_per_second;
    if (rate <= 0) return std::nullopt;
    std::optional<size_t> wildcard;
    for (size_t i = 0; i < config.allow.size(); ++i) {
      if (!EntryAdmits(config.allow[i], host, port)) continue;
      if (!config.allow[i].wildcard) return std::nullopt;  // listed exactly
      if (!wildcard) wildcard = i;
    }
    if (!wildcard) return std::nullopt;
    const double burst = std::max(1.0, rate * 5);
    const auto now = Clock::now();
    auto [it, fresh] = wildcard_budget.try_emplace(*wildcard, LookupBudget{burst, now});
    auto& b = it->second;
    b.tokens = std::min(burst, b.tokens + std::chrono::duration<double>(now - b.last).count() * rate);
    b.last = now;
    if (b.tokens < 1) return FormatAllowEntry(config.allow[*wildcard]);
    b.tokens -= 1;
    return std::nullopt;
  }

  void Accept();
};

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
    return ++proxy_.per_client[client_key_] <= proxy_.config.max_connections_per_client;
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
      if (end && *end <= self->proxy_.config.max_header_bytes) return self->HandleHead(*end);
      if (self->head_.size() > self->proxy_.config.max_header_bytes)
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
    auto host = NormalizeRequestHost(req_.host);
    if (!host.ok()) return Refuse(403, host.error().what);
    req_.host = host.value();
    if (!ListAdmits(proxy_.config.allow, req_.host, req_.port))
      return Refuse(403, req_.host + ":" + std::to_string(req_.port) + " is not in the allowlist");
    if (req_.kind == RequestKind::kPlainHttp && req_.transfer_encoding)
      return Refuse(501, "Transfer-Encoding request bodies are not proxied over plain HTTP (use CONNECT)");
    body_left_ = req_.kind == RequestKind::kPlainHttp ? req_.content_length.value_or(0) : 0;
    if (auto entry = proxy_.OverWildcardRate(req_.host, req_.port)) {
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
      if (auto why = NonPublicReason(ip, proxy_.config.test_public))
        return Refuse(403, req_.host + " resolves to " + ip.ToString() + ", " + *why);
    }
    // An address of the proxy's own host reaches its services, whatever
    // range it is in: refused like loopback (and when the host's addresses
    // cannot be read, every answer is).
    const auto own = OwnAddresses();
    if (!own) return Refuse(403, "cannot read this host's addresses to check " + req_.host + " against them");
    for (const auto& ip : answer.value()) {
      if (IsOwnAddress(ip, *own))
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
    if (now > config.max_connections)
      session->RefuseBusy();
    else if (!client_ok)
      session->RefuseClientBusy();
    else
      session->Start();
    Accept();
  });
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
  struct OwnedFd {
    int fd;
    ~OwnedFd() {
      if (fd >= 0) close(fd);
    }
  } given{config.listen_fd};
  config.listen_fd = -1;
  std::optional<tcp::endpoint> given_ep;
  if (given.fd >= 0) {
    auto ep = ListeningEndpoint(given.fd);
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
    const int fd = given.fd;
    given.fd = -1;
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
