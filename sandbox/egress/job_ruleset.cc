#include "sandbox/egress/job_ruleset.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

namespace oarbank {
namespace {

using egress::Cidr;
using egress::IpAddress;

// `v4` inside an IPv6 prefix of 96 bits (::ffff:0:0/96, 64:ff9b::/96).
Cidr Embed(const Cidr& v4, const IpAddress& prefix96) {
  Cidr out{prefix96, 96 + v4.prefix};
  out.base.v4 = false;
  for (int i = 0; i < 4; ++i) out.base.bytes[12 + i] = v4.base.bytes[i];
  return out;
}

const IpAddress& Mapped() {
  static const IpAddress a = *egress::ParseIpAddress("::ffff:0:0");
  return a;
}
const IpAddress& Nat64() {
  static const IpAddress a = *egress::ParseIpAddress("64:ff9b::");
  return a;
}

Cidr Host(const IpAddress& a) { return Cidr{a, a.v4 ? 32 : 128}; }

}  // namespace

std::vector<DestinationRule> DestinationRules(const RulesetInputs& in) {
  std::vector<DestinationRule> r;
  auto add = [&r](const Cidr& c, bool accept, const std::string& why) { r.push_back({c, accept, why}); };
  // The host's own addresses first: public or not, and whatever a test
  // declares, the stack would deliver them to the host.
  for (const auto& a : in.host_addresses) {
    add(Host(a), false, "the host's own address");
    if (a.v4) {
      add(Embed(Host(a), Mapped()), false, "the host's own address, IPv4-mapped");
      add(Embed(Host(a), Nat64()), false, "the host's own address, NAT64");
    }
  }
  for (const auto& c : in.test_public) {
    add(c, true, "declared public (test)");
    add(Embed(c, Mapped()), true, "declared public (test), IPv4-mapped");
    add(Embed(c, Nat64()), true, "declared public (test), NAT64");
  }
  for (const auto& c : egress::NonPublicIpv4Blocks()) {
    add(c, false, "not public");
    add(Embed(c, Mapped()), false, "not public, IPv4-mapped");
    add(Embed(c, Nat64()), false, "not public, NAT64");
  }
  // What is left of the two prefixes carries a public IPv4 address.
  add(Cidr{Mapped(), 96}, true, "IPv4-mapped public");
  add(Cidr{Nat64(), 96}, true, "NAT64 of a public address");
  for (const auto& c : egress::NonPublicIpv6GlobalBlocks()) add(c, false, "not public");
  add(egress::ParseCidr("2000::/3").value(), true, "global unicast");
  add(egress::ParseCidr("::/0").value(), false, "outside 2000::/3");
  return r;
}

bool RulesAdmit(const std::vector<DestinationRule>& rules, const IpAddress& address) {
  for (const auto& rule : rules)
    if (egress::InCidr(address, rule.cidr)) return rule.accept;
  return address.v4;
}

std::vector<DestinationGroup> GroupDestinationRules(const std::vector<DestinationRule>& rules) {
  std::vector<DestinationGroup> groups;
  for (const bool v4 : {true, false}) {
    const size_t first = groups.size();
    for (const auto& rule : rules) {
      if (rule.cidr.base.v4 != v4) continue;
      if (groups.size() == first || groups.back().accept != rule.accept) groups.push_back({v4, rule.accept, {}});
      groups.back().cidrs.push_back(rule.cidr);
    }
  }
  // A block inside another of the same group (or equal to an earlier one)
  // changes nothing the group matches.
  for (auto& group : groups) {
    std::vector<Cidr> kept;
    for (size_t i = 0; i < group.cidrs.size(); ++i) {
      const Cidr& c = group.cidrs[i];
      bool inside = false;
      for (size_t j = 0; j < group.cidrs.size() && !inside; ++j) {
        const Cidr& o = group.cidrs[j];
        inside = j != i && egress::InCidr(c.base, o) && (c.prefix > o.prefix || (c.prefix == o.prefix && j < i));
      }
      if (!inside) kept.push_back(c);
    }
    group.cidrs = std::move(kept);
  }
  return groups;
}

bool GroupsAdmit(const std::vector<DestinationGroup>& groups, const IpAddress& address) {
  for (const auto& group : groups)
    for (const auto& cidr : group.cidrs)
      if (egress::InCidr(address, cidr)) return group.accept;
  return address.v4;
}

std::string RulesetText(const RulesetInputs& in) {
  // Whatever the namespace held before goes in the same transaction: the
  // job's network has this ruleset and nothing else (another table's
  // late-priority NAT could otherwise rewrite a destination this one let
  // through).
  std::string t = "flush ruleset\n";
  t += "table inet oarbank {\n";
  t += kJobRulesetRefuseChain;
  t += "  chain output {\n";
  t += "    type filter hook output priority filter; policy accept;\n";
  // The job's own loopback is its own namespace's, not the host's.
  t += "    oif \"lo\" accept\n";
  t += std::string("    ip daddr ") + kJobStackDns4 + " udp dport 53 accept\n";
  t += std::string("    ip daddr ") + kJobStackDns4 + " tcp dport 53 accept\n";
  t += std::string("    ip6 daddr ") + kJobStackDns6 + " udp dport 53 accept\n";
  t += std::string("    ip6 daddr ") + kJobStackDns6 + " tcp dport 53 accept\n";
  // Neighbour discovery with the stack: on-link only (hop limit 255).
  t += "    icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } ip6 hoplimit 255 accept\n";
  for (const auto& group : GroupDestinationRules(DestinationRules(in))) {
    std::string blocks;
    for (const auto& cidr : group.cidrs) blocks += (blocks.empty() ? "" : ", ") + cidr.ToString();
    if (group.cidrs.size() > 1) blocks = "{ " + blocks + " }";
    t += std::string("    ") + (group.v4 ? "ip" : "ip6") + " daddr " + blocks +
         (group.accept ? " accept" : std::string(" ") + kJobRulesetRefusal) + "\n";
  }
  t += "  }\n";
  // Every name query goes to the stack's resolver, whatever server the
  // job's resolv.conf (the host's) names: a LAN or link-local resolver is
  // not public, and the job resolves through the stack alone. Loopback is
  // the job's own namespace's and left alone.
  t += "  chain dns {\n";
  t += "    type nat hook output priority -100; policy accept;\n";
  for (const char* proto : {"udp", "tcp"}) {
    t += std::string("    ip daddr != 127.0.0.0/8 ") + proto + " dport 53 dnat ip to " + kJobStackDns4 + "\n";
    t += std::string("    ip6 daddr != ::1 ") + proto + " dport 53 dnat ip6 to " + kJobStackDns6 + "\n";
  }
  t += "  }\n";
  t += "  chain input {\n";
  t += "    type filter hook input priority filter; policy drop;\n";
  t += "    iif \"lo\" accept\n";
  t += "    ct state established,related accept\n";
  t += "    icmpv6 type { nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } ip6 hoplimit 255 accept\n";
  t += "    counter name \"dropped\" drop\n";
  t += "  }\n";
  t += "}\n";
  return t;
}

std::vector<IpAddress> HostAddresses() {
  std::vector<IpAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    IpAddress a;
    if (i->ifa_addr->sa_family == AF_INET) {
      a.v4 = true;
      memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      a.v4 = false;
      memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    bool seen = false;
    for (const auto& b : out) seen = seen || b == a;
    if (!seen) out.push_back(a);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace oarbank
