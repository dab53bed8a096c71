// The egress proxy's inside, shared by its two files: proxy.cc (starting,
// stopping, the helpers) and proxy_session.cc (one client connection, from
// its request to the end of its tunnel). Internal to sandbox/egress.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <nlohmann/json.hpp>

#include "sandbox/egress/proxy.h"
#include "sandbox/egress/request.h"

namespace oarbank::egress {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

inline constexpr size_t kRelayBuffer = 64 * 1024;
inline constexpr size_t kSpliceChunk = 1024 * 1024;
inline constexpr int kSplicePipeSize = 1024 * 1024;
inline constexpr size_t kLogFieldBytes = 256;
// Refusal lines per client address: a burst, then a steady rate; what is
// over it is counted and the count logged with the client's next line (or
// when the proxy stops).
inline constexpr double kRefusalBurst = 50;
inline constexpr double kRefusalsPerSecond = 5;
inline constexpr size_t kMaxTrackedClients = 4096;

asio::ip::address ToAsio(const IpAddress& ip);
const char* StatusText(int status);             // "Forbidden" for 403
std::string Endpoint(const tcp::endpoint& ep);  // "1.2.3.4:80", "[::1]:80"
// A log field as written: printable ASCII kept (JSON escapes quotes and
// backslashes), every other byte as \xNN, and at most kLogFieldBytes of the
// text kept, with the length of what was cut.
std::string LogField(std::string_view text);
// The addresses of every interface in this network namespace, or nullopt
// when they cannot be read. Read at every check: an address added a moment
// ago counts.
std::optional<std::vector<IpAddress>> OwnAddresses();
// Whether `ip`, or the IPv4 address an IPv4-mapped `ip` carries, is one of `own`.
bool IsOwnAddress(const IpAddress& ip, const std::vector<IpAddress>& own);

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

}  // namespace oarbank::egress
