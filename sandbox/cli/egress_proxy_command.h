// `oarbank-agent egress-proxy`: runs the egress proxy (sandbox/egress/proxy.h) in the
// foreground until SIGINT or SIGTERM. Prints one JSON line on stdout once it
// listens ({"event":"egress_listening","address":...,"port":N,...}); logs
// one JSON line per connection and per refusal on stderr. Bad options exit
// 64 with one line naming the option.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace oarbank::egress {

struct ProxyCommandOptions {
  std::string listen;              // "127.0.0.1:PORT" or "[::1]:PORT"
  std::vector<std::string> allow;  // --allow, repeatable
  std::string policy;              // --policy: net.allow and net.proxy_port
  double header_timeout_s = 10;
  double idle_timeout_s = 300;
  double connect_timeout_s = 10;
  size_t max_connections = 1024;
  size_t max_connections_per_client = 64;
  double wildcard_lookups_per_second = 10;
  size_t max_header_bytes = 16 * 1024;
  // Test-only: never set in production.
  std::vector<std::string> test_public_ranges;  // CIDRs inside 198.18.0.0/15
  std::string test_resolver;                    // FileResolver answers
};

int RunEgressProxyCommand(const ProxyCommandOptions& options);

}  // namespace oarbank::egress

namespace oarbank {

// The subcommand's options, registered on oarbank-agent's command line.
class EgressProxyCommand {
 public:
  explicit EgressProxyCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `egress-proxy` was parsed, else nothing.
  std::optional<int> Run() const;

 private:
  std::shared_ptr<egress::ProxyCommandOptions> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
