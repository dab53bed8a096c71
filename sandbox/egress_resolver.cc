#include "egress_resolver.h"

#include "read_file.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace oarbank::egress {
namespace {

class SystemResolver : public Resolver {
 public:
  Result<std::vector<IpAddress>> Resolve(const std::string& host) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) return Error{"resolve", std::string("cannot resolve: ") + gai_strerror(rc)};
    std::vector<IpAddress> out;
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      IpAddress ip;
      if (ai->ai_family == AF_INET) {
        ip.v4 = true;
        memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
      } else if (ai->ai_family == AF_INET6) {
        ip.v4 = false;
        memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
      } else {
        continue;
      }
      if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
    }
    freeaddrinfo(res);
    if (out.empty()) return Error{"resolve", "cannot resolve: no IPv4 or IPv6 address"};
    return out;
  }
};

}  // namespace

std::unique_ptr<Resolver> MakeSystemResolver() { return std::make_unique<SystemResolver>(); }

Result<std::vector<IpAddress>> FileResolver::Resolve(const std::string& host) {
  std::lock_guard lock(mu_);
  std::string why;
  const auto text = ReadFileUpTo(path_, 1u << 20, &why);
  if (!text) return Error{"resolve", "cannot read the test resolver file " + path_ + ": " + why};
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string name;
    if (!(words >> name) || name != host) continue;
    std::vector<std::string> answers;
    for (std::string a; words >> a;) answers.push_back(a);
    if (answers.empty()) break;
    const size_t n = lookups_[host]++;
    const std::string& answer = answers[std::min(n, answers.size() - 1)];
    std::vector<IpAddress> out;
    std::istringstream addrs(answer);
    for (std::string a; std::getline(addrs, a, ',');) {
      auto ip = ParseIpAddress(a);
      if (!ip) return Error{"resolve", "test resolver file: not an address: " + a};
      out.push_back(*ip);
    }
    if (out.empty()) break;
    return out;
  }
  return Error{"resolve", "cannot resolve: not in the test resolver file"};
}

}  // namespace oarbank::egress
