// The agent's local egress proxy (net.mode = "egress-allowlist"): HTTP
// CONNECT and absolute-form plain HTTP on a loopback listener, built on
// standalone Asio (header-only, so the static oarbank-agent stays static).
//
// For each request: parse the head (sandbox/egress/request.h), normalize the host
// and match host:port against the allowlist (sandbox/egress/allowlist.h), resolve
// the name ONCE (sandbox/egress/resolver.h), refuse if ANY of its addresses is not
// public, then connect to one of exactly those addresses. The name is never
// looked up again, so a name that changes its answer between the check and
// the connect (DNS rebinding) cannot reach a private address.
//
// Every refusal answers an HTTP status with a one-line reason in the body
// and writes one JSON line to the log: 400 malformed head, 403 policy (not
// listed, IP literal, non-public address), 408 no complete head in time, 431
// head too large, 429 too many lookups under a wildcard entry, 501 chunked
// upload over plain HTTP, 502 no answer or no connection, 503 too many
// connections (in all, or from one client).
//
// Limits: what a CONNECT tunnel carries is opaque: a listed host that is
// itself an open proxy, or that shares its address with other sites, is
// reachable as far as that host allows. Plain HTTP is one request per
// connection (the head rewritten, Content-Length bytes of body forwarded,
// anything after it never sent), so a second request cannot ride along to
// another virtual host.
//
// A listed name that resolves to an address of the proxy's own host (any
// interface of its network namespace) is refused like loopback. Log lines
// are bounded: every field cut to 256 bytes and escaped, and refusals from
// one client address rate-limited, with the count of the lines dropped.
//
// Threading: one event-loop thread owns every socket; lookups are
// asynchronous (sandbox/egress/resolver.h: c-ares on its own thread) and post their
// answer back to the loop.
// Its threads block SIGPIPE, so a peer that went away is an EPIPE and never
// a signal to the process that embeds the proxy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/egress/resolver.h"

namespace oarbank::egress {

struct ProxyConfig {
  std::string listen_address = "127.0.0.1";  // loopback only (127.0.0.0/8 or ::1)
  uint16_t listen_port = 0;                  // 0: any free port
  // An already-listening TCP socket on loopback to serve instead of binding
  // listen_address:listen_port (the supervisor's job listener, made in the
  // job's network namespace). The proxy owns it from Start on, even when
  // Start fails. Upstream connections are made in the proxy's own network
  // namespace, whatever namespace this socket belongs to.
  int listen_fd = -1;
  std::vector<AllowEntry> allow;
  std::vector<Cidr> test_public;       // test-only: ParseTestPublicRange
  std::shared_ptr<Resolver> resolver;  // default: MakeSystemResolver()
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds idle_timeout{300'000};
  size_t max_header_bytes = 16 * 1024;
  size_t max_connections = 1024;
  // Connections one client (one source address; under `run`, the job) may
  // hold at once, so one client cannot take every slot.
  size_t max_connections_per_client = 64;
  // Lookups a second under each wildcard entry (a burst of five seconds'
  // worth; 0: no limit). A wildcard lets the client choose the labels the
  // proxy looks up, a channel to the domain's name servers: this bounds its
  // rate, it cannot close it. Names an exact entry admits are not counted.
  double wildcard_lookups_per_second = 10;
  // One JSON object per call, no newline. Default: a line on stderr.
  std::function<void(const std::string&)> log;
};

class EgressProxy {
 public:
  // Binds the listener (or takes config.listen_fd) and starts serving on
  // its own threads. An Error names the setting at fault ("listen", "allow").
  static Expected<std::unique_ptr<EgressProxy>> Start(ProxyConfig config);
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  uint16_t port() const;
  std::string address() const;
  // Closes the listener and every connection, and joins the threads.
  void Stop();

  struct Impl;

 private:
  explicit EgressProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace oarbank::egress
