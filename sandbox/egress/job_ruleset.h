// The nftables ruleset of an egress-any job's network namespace: outbound
// to public addresses and the stack's DNS resolver, nothing else; nothing
// inbound but replies. Pure: built from the egress proxy's own
// classification (sandbox/egress/allowlist.h NonPublicReason), so the job's packet
// filter and the proxy refuse exactly the same addresses.
//
// The destination rules are an ordered first-match list; `RulesAdmit`
// evaluates it as the kernel does, which is how the tests hold it equal to
// NonPublicReason, address by address.
#pragma once

#include <string>
#include <vector>

#include "sandbox/egress/allowlist.h"

namespace oarbank {

// The user-mode stack's fixed addressing inside the job (slirp4netns).
inline constexpr char kJobStackDns4[] = "10.0.2.3";
inline constexpr char kJobStackDns6[] = "fd00::3";

struct RulesetInputs {
  std::vector<egress::Cidr> test_public;          // egress::ParseTestPublicRange only
  std::vector<egress::IpAddress> host_addresses;  // the supervisor's own, public or not
};

struct DestinationRule {
  egress::Cidr cidr;
  bool accept = false;
  std::string why;
};

// First match wins; an IPv4 address no rule matches is public (accepted),
// an IPv6 address no rule matches is dropped (the list ends with ::/0).
std::vector<DestinationRule> DestinationRules(const RulesetInputs& in);
bool RulesAdmit(const std::vector<DestinationRule>& rules, const egress::IpAddress& address);

// The destination rules as the ruleset writes them. An IPv4 rule never
// matches an IPv6 packet, so each family's rules keep their order apart
// from the other's; within a family each run of neighbours with the same
// verdict becomes one rule on an anonymous set of their blocks (a block
// inside another of its group is left out: the set holds no overlap).
// libnftables parses and evaluates one rule on a set of fourteen blocks for
// far less than fourteen rules, and the install is on every egress-any
// job's path. `GroupsAdmit` evaluates the groups as the kernel does, which
// is how the tests hold them equal to the list.
struct DestinationGroup {
  bool v4 = true;
  bool accept = false;
  std::vector<egress::Cidr> cidrs;
};
std::vector<DestinationGroup> GroupDestinationRules(const std::vector<DestinationRule>& rules);
bool GroupsAdmit(const std::vector<DestinationGroup>& groups, const egress::IpAddress& address);

// What the output chain does with a destination that is not public: the
// packet never leaves, it is counted, and the sender is told at once
// rather than left to time out (chain `refuse`, kJobRulesetRefuseChain): a
// TCP connect is answered with a reset (ECONNREFUSED: the reset is queued
// to the socket and read as soon as connect lets go of it, where an ICMP
// error arriving while connect still sends the SYN would be set aside until
// the SYN is sent again, a second later), anything else with an ICMP
// admin-prohibited (EPERM from sendto). Every refusal, and every inbound
// packet dropped, counts on the table's one named counter, `dropped`,
// which the supervisor reads after the job as one object, without listing
// the ruleset.
inline constexpr char kJobRulesetRefusal[] = "goto refuse";
inline constexpr char kJobRulesetRefuseChain[] =
    "  counter dropped {\n"
    "  }\n"
    "  chain refuse {\n"
    "    counter name \"dropped\"\n"
    "    meta l4proto tcp reject with tcp reset\n"
    "    reject with icmpx admin-prohibited\n"
    "  }\n";

// The ruleset in nft's syntax: a flush of whatever the namespace holds, then
// table inet oarbank, chains output and input.
std::string RulesetText(const RulesetInputs& in);

// The addresses of every interface of this process's network namespace.
std::vector<egress::IpAddress> HostAddresses();

}  // namespace oarbank
