// Name resolution for the egress proxy, behind an interface so tests can
// control the answers. The proxy asks once per request and connects only to
// an address from that one answer (never a second lookup: DNS rebinding
// between check and connect cannot reach a private address).
//
// The system resolver is c-ares (libcares.a, linked into the static agent),
// driven on a thread of its own: a lookup never blocks the caller nor any
// other lookup, however slow its name servers are, and concurrent lookups
// of one name share one query. Every lookup is of exactly the name asked:
// no search list (resolv.conf's `search`/`domain` and LOCALDOMAIN are
// ignored), no `ndots`, no HOSTALIASES; a name that is not found is not
// found, never retried with a suffix. /etc/hosts is read first ("files"),
// then DNS with the servers of /etc/resolv.conf, read again when it changes
// (looked at once a second; the new servers are taken at a moment no
// lookup is in flight).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/egress/allowlist.h"

namespace oarbank::egress {

class Resolver {
 public:
  using Answer = Expected<std::vector<IpAddress>>;
  using Callback = std::function<void(Answer)>;
  virtual ~Resolver() = default;
  // Looks `host` up (a normalized name: lower case, no trailing dot) and
  // calls `done` exactly once, on any thread, possibly before returning,
  // with every address the name has (IPv4 and IPv6, never an empty vector)
  // or an Error whose `what` is the reason. Never blocks on the network.
  // Destroying the resolver answers what is still pending with an Error.
  virtual void Resolve(const std::string& host, Callback done) = 0;
};

struct SystemResolverOptions {
  int timeout_ms = 3000;  // per try and server
  int tries = 2;
};

std::unique_ptr<Resolver> MakeSystemResolver(const SystemResolverOptions& options = {});

// Test-only (`egress-proxy --test-resolver FILE`): answers from a file that
// is re-read on every lookup, one name per line:
//   NAME ANSWER [ANSWER ...]      ANSWER = ADDR[,ADDR...]
// The n-th lookup of NAME gets the n-th ANSWER (the last one repeats), so a
// test can make a name change its answer between two lookups (rebinding).
// A name not in the file does not resolve. '#' starts a comment. Answers
// at once, on the caller's thread.
class FileResolver : public Resolver {
 public:
  explicit FileResolver(std::string path) : path_(std::move(path)) {}
  void Resolve(const std::string& host, Callback done) override { done(Lookup(host)); }
  Answer Lookup(const std::string& host);

 private:
  std::string path_;
  std::mutex mu_;
  std::map<std::string, size_t> lookups_;
};

}  // namespace oarbank::egress
