// The egress-any job's ruleset (job_ruleset.h) refuses exactly what the
// egress proxy refuses (NonPublicReason), address by address; the kernel's
// side of it is in harness/test_egress_any.py.
#include "sandbox/egress/job_ruleset.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace oarbank {
namespace {

using egress::IpAddress;

IpAddress Ip(const std::string& text) {
  auto ip = egress::ParseIpAddress(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress{});
}

const char* kEdges[] = {
    "0.0.0.0",
    "0.255.255.255",
    "1.1.1.1",
    "9.255.255.255",
    "10.0.0.0",
    "10.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.64.0.0",
    "100.127.255.255",
    "100.128.0.0",
    "127.0.0.1",
    "169.254.169.254",
    "172.15.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "172.32.0.0",
    "192.0.0.1",
    "192.0.2.1",
    "192.88.99.1",
    "192.168.1.1",
    "198.17.255.255",
    "198.18.0.1",
    "198.19.255.255",
    "198.20.0.0",
    "198.51.100.1",
    "203.0.113.1",
    "224.0.0.1",
    "239.255.255.255",
    "240.0.0.1",
    "255.255.255.255",
    "8.8.8.8",
    "::",
    "::1",
    "::10.0.0.1",
    "::8.8.8.8",
    "::ffff:10.0.0.1",
    "::ffff:8.8.8.8",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::8.8.8.8",
    "64:ff9b::10.1.2.3",
    "64:ff9b::198.19.0.2",
    "64:ff9b:1::1",
    "100::1",
    "fc00::1",
    "fd00::3",
    "fe80::1",
    "fec0::1",
    "ff02::1",
    "ff0e::1",
    "2001::1",
    "2001:1ff::1",
    "2001:200::1",
    "2001:db8::1",
    "2002:a00:1::1",
    "2002:808:808::1",
    "2606:4700::1111",
    "3fff::1",
    "4000::1",
    "1fff:ffff::1",
    "2000::",
    "3fff:ffff::1",
};

void ExpectSameAsProxy(const RulesetInputs& in, const IpAddress& a) {
  const auto rules = DestinationRules(in);
  EXPECT_EQ(RulesAdmit(rules, a), !egress::NonPublicReason(a, in.test_public).has_value()) << a.ToString();
  EXPECT_EQ(GroupsAdmit(GroupDestinationRules(rules), a), RulesAdmit(rules, a)) << a.ToString();
}

TEST(JobRuleset, RefusesExactlyWhatTheProxyRefusesAtTheEdges) {
  for (const char* text : kEdges) ExpectSameAsProxy({}, Ip(text));
  RulesetInputs test;
  test.test_public = {egress::ParseTestPublicRange("198.19.0.0/16").value()};
  for (const char* text : kEdges) ExpectSameAsProxy(test, Ip(text));
  EXPECT_TRUE(RulesAdmit(DestinationRules(test), Ip("198.19.0.2")));
  EXPECT_TRUE(RulesAdmit(DestinationRules(test), Ip("64:ff9b::198.19.0.2")));
  EXPECT_FALSE(RulesAdmit(DestinationRules(test), Ip("198.18.0.2")));
}

// An address of either family: random bytes under a prefix the tables
// care about, or none (inside a rapidcheck property).
IpAddress RandomAddress() {
  IpAddress a;
  a.v4 = *rc::gen::arbitrary<bool>();
  static const char* prefixes[] = {"::", "::ffff:0:0", "64:ff9b::", "2001::", "2002::", "fc00::", "fe80::", "ff00::"};
  const IpAddress base = a.v4 ? IpAddress{} : Ip(prefixes[*rc::gen::inRange<size_t>(0, std::size(prefixes))]);
  const auto bytes = *rc::gen::container<std::vector<uint8_t>>(16, rc::gen::arbitrary<uint8_t>());
  const int keep = a.v4 ? 0 : (*rc::gen::arbitrary<bool>() ? 12 : 4);
  for (size_t i = 0; i < 16; ++i) a.bytes[i] = static_cast<int>(i) < keep ? base.bytes[i] : bytes[i];
  if (a.v4)
    for (size_t i = 4; i < 16; ++i) a.bytes[i] = 0;
  return a;
}

RC_GTEST_PROP(JobRuleset, RefusesExactlyWhatTheProxyRefuses, ()) {
  const IpAddress a = RandomAddress();
  RulesetInputs in;
  if (*rc::gen::arbitrary<bool>()) in.test_public = {egress::ParseTestPublicRange("198.19.0.0/16").value()};
  RC_ASSERT(RulesAdmit(DestinationRules(in), a) == !egress::NonPublicReason(a, in.test_public).has_value());
}

// The groups the ruleset writes admit exactly what the ordered list
// admits, with host addresses public, private, inside the test range and
// IPv6 among the rules (a host address inside a refused block is a block
// inside another of its group).
RC_GTEST_PROP(JobRuleset, TheGroupsAdmitWhatTheListAdmits, ()) {
  const IpAddress a = RandomAddress();
  RulesetInputs in;
  if (*rc::gen::arbitrary<bool>()) in.test_public = {egress::ParseTestPublicRange("198.18.0.0/15").value()};
  static const char* hosts[] = {"10.0.2.100", "198.18.0.1", "8.8.4.4", "127.0.0.1", "2606:4700::1", "fe80::1", "::1"};
  for (const char* host : hosts)
    if (*rc::gen::arbitrary<bool>()) in.host_addresses.push_back(Ip(host));
  const auto rules = DestinationRules(in);
  RC_ASSERT(GroupsAdmit(GroupDestinationRules(rules), a) == RulesAdmit(rules, a));
}

// Each family's groups alternate their verdicts (a run of one verdict is
// one group), and no block of a group lies inside another of it (nft's
// interval sets take no overlap).
TEST(JobRuleset, GroupsAlternateAndHoldNoNestedBlock) {
  RulesetInputs in;
  in.test_public = {egress::ParseTestPublicRange("198.18.0.0/15").value()};
  in.host_addresses = {Ip("10.0.2.100"), Ip("198.18.0.1"), Ip("fe80::1")};
  const auto groups = GroupDestinationRules(DestinationRules(in));
  ASSERT_FALSE(groups.empty());
  EXPECT_TRUE(groups.front().v4);
  EXPECT_FALSE(groups.back().v4);
  size_t blocks = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) {
      const bool same_family = groups[i].v4 == groups[i - 1].v4;
      EXPECT_TRUE(!same_family || groups[i].accept != groups[i - 1].accept) << "two groups of one verdict: " << i;
      EXPECT_TRUE(!groups[i].v4 || groups[i - 1].v4) << "an IPv4 group after an IPv6 one: " << i;
    }
    for (const auto& c : groups[i].cidrs) {
      ++blocks;
      EXPECT_EQ(c.base.v4, groups[i].v4);
      for (const auto& o : groups[i].cidrs) {
        const bool nested = &o != &c && egress::InCidr(c.base, o) && c.prefix >= o.prefix;
        EXPECT_FALSE(nested) << c.ToString() << " in " << o.ToString();
      }
    }
  }
  // 10.0.2.100 lies inside 10.0.0.0/8, refused by the same group.
  EXPECT_LT(blocks, DestinationRules(in).size());
  EXPECT_LT(groups.size(), 12u);
  // The same block twice is kept once.
  const auto ten = egress::ParseCidr("10.0.0.0/8").value();
  const auto twice = GroupDestinationRules({{ten, false, "a"}, {ten, false, "b"}});
  ASSERT_EQ(twice.size(), 1u);
  EXPECT_EQ(twice[0].cidrs.size(), 1u);
}

TEST(JobRuleset, TheHostsOwnAddressesAreDroppedEvenWhenPublicOrDeclaredSo) {
  RulesetInputs in;
  in.test_public = {egress::ParseTestPublicRange("198.18.0.0/15").value()};
  in.host_addresses = {Ip("198.18.0.1"), Ip("8.8.4.4"), Ip("2606:4700::1")};
  const auto rules = DestinationRules(in);
  for (const char* own : {"198.18.0.1", "::ffff:198.18.0.1", "64:ff9b::198.18.0.1", "8.8.4.4", "::ffff:8.8.4.4",
                          "64:ff9b::8.8.4.4", "2606:4700::1"})
    EXPECT_FALSE(RulesAdmit(rules, Ip(own))) << own;
  EXPECT_TRUE(RulesAdmit(rules, Ip("198.18.0.2")));
  EXPECT_TRUE(RulesAdmit(rules, Ip("8.8.8.8")));
  EXPECT_TRUE(RulesAdmit(rules, Ip("2606:4700::2")));
}

TEST(JobRuleset, TextHasEveryRuleTheResolverAndNoInbound) {
  RulesetInputs in;
  in.host_addresses = {Ip("192.168.5.5")};
  const std::string text = RulesetText(in);
  // Nothing the namespace held before the install stays beside it.
  EXPECT_EQ(text.rfind("flush ruleset\ntable inet oarbank {\n", 0), 0u) << text.substr(0, 80);
  for (const auto& group : GroupDestinationRules(DestinationRules(in))) {
    std::string blocks;
    for (const auto& cidr : group.cidrs) blocks += (blocks.empty() ? "" : ", ") + cidr.ToString();
    const std::string line = std::string(group.v4 ? "ip" : "ip6") + " daddr " +
                             (group.cidrs.size() > 1 ? "{ " + blocks + " }" : blocks) +
                             (group.accept ? std::string(" accept") : std::string(" ") + kJobRulesetRefusal);
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
  }
  EXPECT_NE(text.find("ip daddr 10.0.2.3 udp dport 53 accept"), std::string::npos);
  EXPECT_NE(text.find("ip6 daddr fd00::3 tcp dport 53 accept"), std::string::npos);
  EXPECT_NE(text.find("type filter hook input priority filter; policy drop;"), std::string::npos);
  // A refused TCP connect is reset (no SYN sent again a second later).
  EXPECT_LT(text.find("meta l4proto tcp reject with tcp reset"), text.find("chain output"));
  // Name queries to any server go to the stack's resolver.
  EXPECT_NE(text.find("ip daddr != 127.0.0.0/8 udp dport 53 dnat ip to 10.0.2.3"), std::string::npos);
  EXPECT_NE(text.find("ip6 daddr != ::1 tcp dport 53 dnat ip6 to fd00::3"), std::string::npos);
  // The resolver is accepted before the private block that holds it is dropped.
  ASSERT_NE(text.find(" 10.0.0.0/8"), std::string::npos);
  EXPECT_LT(text.find("ip daddr 10.0.2.3 udp dport 53 accept"), text.find(" 10.0.0.0/8"));
}

}  // namespace
}  // namespace oarbank
