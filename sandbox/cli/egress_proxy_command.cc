#include "sandbox/cli/egress_proxy_command.h"

#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "sandbox/cli/numbers.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/egress/proxy.h"
#include "sandbox/policy/policy.h"

namespace oarbank::egress {
namespace {

// "127.0.0.1:PORT" or "[::1]:PORT" into address and port.
bool SplitListen(const std::string& text, std::string& address, int& port) {
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) return false;
    address = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return false;
    address = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  port = std::stoi(port_text);
  return port <= 65535;
}

}  // namespace

int RunEgressProxyCommand(const ProxyCommandOptions& o) {
  ProxyConfig config;
  std::vector<std::string> entries = o.allow;
  int port = -1;
  if (!o.policy.empty()) {
    auto policy = LoadPolicyFile(o.policy);
    if (!policy.ok()) {
      fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
      return PolicyErrorExit(policy.error());
    }
    if (policy.value().net().mode != NetMode::kEgressAllowlist)
      return UsageLine("--policy: net.mode is " + std::string(NetModeName(policy.value().net().mode)) +
                       ", expected egress-allowlist");
    entries.insert(entries.end(), policy.value().net().allow.begin(), policy.value().net().allow.end());
    port = policy.value().net().proxy_port;
  }
  if (entries.empty()) return UsageLine("egress-proxy: expected --allow ENTRY or --policy POLICY.json");
  for (const auto& e : entries) {
    auto entry = ParseAllowEntry(e);
    if (!entry.ok()) return UsageLine("--allow " + e + ": " + entry.error().what);
    config.allow.push_back(entry.value());
  }
  if (!o.listen.empty()) {
    if (!SplitListen(o.listen, config.listen_address, port))
      return UsageLine("--listen: expected 127.0.0.1:PORT or [::1]:PORT, got " + o.listen);
  } else if (port < 0) {
    return UsageLine("egress-proxy: expected --listen 127.0.0.1:PORT (or a --policy with net.proxy_port)");
  }
  config.listen_port = static_cast<uint16_t>(port);
  for (const auto& r : o.test_public_ranges) {
    auto cidr = ParseTestPublicRange(r);
    if (!cidr.ok()) return UsageLine("--test-public-range " + r + ": " + cidr.error().what);
    config.test_public.push_back(cidr.value());
  }
  if (!o.test_resolver.empty()) config.resolver = std::make_shared<FileResolver>(o.test_resolver);
  using ms = std::chrono::milliseconds;
  config.header_timeout = ms(static_cast<long long>(o.header_timeout_s * 1000));
  config.idle_timeout = ms(static_cast<long long>(o.idle_timeout_s * 1000));
  config.connect_timeout = ms(static_cast<long long>(o.connect_timeout_s * 1000));
  config.max_connections = o.max_connections;
  config.max_connections_per_client = o.max_connections_per_client;
  config.wildcard_lookups_per_second = o.wildcard_lookups_per_second;
  config.max_header_bytes = o.max_header_bytes;

  // Each connection holds two sockets and, while relaying, two pipes: use
  // the whole file descriptor allowance the agent has.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  // Block the stop signals before any thread starts, so only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::vector<AllowEntry> proxy_allow = config.allow;
  auto proxy = EgressProxy::Start(std::move(config));
  if (!proxy.ok()) return UsageLine("--" + proxy.error().where + ": " + proxy.error().what);
  nlohmann::ordered_json ready = {{"event", "egress_listening"},
                                  {"address", proxy.value()->address()},
                                  {"port", proxy.value()->port()},
                                  {"allow", nlohmann::json::array()}};
  for (const auto& e : proxy_allow) ready["allow"].push_back(FormatAllowEntry(e));
  if (!o.test_public_ranges.empty()) ready["test_public_ranges"] = o.test_public_ranges;
  if (!o.test_resolver.empty()) ready["test_resolver"] = o.test_resolver;
  std::cout << ready.dump() << std::endl;

  int sig = 0;
  sigwait(&stop, &sig);
  proxy.value()->Stop();
  return 0;
}

}  // namespace oarbank::egress

namespace oarbank {

bool EgressProxyCommand::Names(const std::string& name) { return name == "egress-proxy"; }

EgressProxyCommand::EgressProxyCommand(CLI::App& app) : o_(std::make_shared<egress::ProxyCommandOptions>()) {
  egress::ProxyCommandOptions& o = *o_;
  sub_ =
      app.add_subcommand("egress-proxy", "Serve the egress allowlist proxy (HTTP CONNECT, plain http://) on loopback");
  sub_->add_option("--listen", o.listen, "127.0.0.1:PORT or [::1]:PORT (default: the policy's proxy_port)");
  sub_->add_option("--allow", o.allow, "host[:port], '*.' for subdomains, 443 by default (repeatable)");
  sub_->add_option("--policy", o.policy, "Take the list and the port from this policy's net");
  sub_->add_option("--header-timeout", o.header_timeout_s, "Seconds to send a request head")
      ->check(FiniteRange(0.01, 3600.0));
  sub_->add_option("--idle-timeout", o.idle_timeout_s, "Close a connection idle this many seconds")
      ->check(FiniteRange(0.01, 1e6));
  sub_->add_option("--connect-timeout", o.connect_timeout_s, "Seconds to connect upstream")
      ->check(FiniteRange(0.01, 3600.0));
  sub_->add_option("--max-connections", o.max_connections, "Connections at once")->check(CLI::Range(1, 1 << 20));
  sub_->add_option("--max-connections-per-client", o.max_connections_per_client,
                   "Connections one client address may hold at once (64)")
      ->check(CLI::Range(1, 1 << 20));
  sub_->add_option("--wildcard-lookups-per-second", o.wildcard_lookups_per_second,
                   "Lookups a second under each *. entry, a burst of 5 s worth (10; 0: no limit)")
      ->check(CLI::Range(0.0, 1e6));
  sub_->add_option("--max-header-bytes", o.max_header_bytes, "Largest request head")->check(CLI::Range(256, 1 << 20));
  sub_->add_option("--test-public-range", o.test_public_ranges,
                   "Treat this CIDR as public; it must lie inside 198.18.0.0/15, the benchmarking range no real host "
                   "uses (test hosts; repeatable)");
  AddTestResolver(sub_, "--test-resolver", o.test_resolver,
                  "Answer lookups from this file (NAME ADDR[,ADDR] [next answer...])");
}

std::optional<int> EgressProxyCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  return egress::RunEgressProxyCommand(*o_);
}

}  // namespace oarbank
