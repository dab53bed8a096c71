// Name resolution for the egress proxy, behind an interface so tests can
// control the answers. Resolve is blocking and must be thread-safe: the
// proxy calls it from a worker pool, once per request, and connects only to
// an address from that one answer (never a second lookup: DNS rebinding
// between check and connect cannot reach a private address).
//
// The system resolver is getaddrinfo. oarbank-agent is linked -static: with
// glibc >= 2.34 the "files" and "dns" NSS modules are inside libc.a, so
// `hosts: files dns` (Debian's default) works without loading anything; any
// other NSS module (mdns, resolve, myhostname) would be dlopen'ed and needs
// the shared glibc of the version the binary was linked with (the linker's
// getaddrinfo warning). The proxy never needs more than files and dns.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "egress_allowlist.h"
#include "result.h"

namespace oarbank::egress {

class Resolver {
 public:
  virtual ~Resolver() = default;
  // Every address the name has (IPv4 and IPv6), or an Error whose `what`
  // is the reason. Never an empty vector.
  virtual Result<std::vector<IpAddress>> Resolve(const std::string& host) = 0;
};

std::unique_ptr<Resolver> MakeSystemResolver();

// Test-only (`egress-proxy --test-resolver FILE`): answers from a file that
// is re-read on every lookup, one name per line:
//   NAME ANSWER [ANSWER ...]      ANSWER = ADDR[,ADDR...]
// The n-th lookup of NAME gets the n-th ANSWER (the last one repeats), so a
// test can make a name change its answer between two lookups (rebinding).
// A name not in the file does not resolve. '#' starts a comment.
class FileResolver : public Resolver {
 public:
  explicit FileResolver(std::string path) : path_(std::move(path)) {}
  Result<std::vector<IpAddress>> Resolve(const std::string& host) override;

 private:
  std::string path_;
  std::mutex mu_;
  std::map<std::string, size_t> lookups_;
};

}  // namespace oarbank::egress
