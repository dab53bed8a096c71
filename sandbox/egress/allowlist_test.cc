// The egress proxy's pure decisions: allow entries, request hosts, and which
// addresses are public. End-to-end behaviour against real peers is in
// harness/test_egress.py.
#include "sandbox/egress/allowlist.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace oarbank::egress {
namespace {

AllowEntry Entry(const std::string& text) {
  auto e = ParseAllowEntry(text);
  EXPECT_TRUE(e.ok()) << text << ": " << (e.ok() ? "" : e.error().what);
  return e.ok() ? e.value() : AllowEntry{};
}

IpAddress Ip(const std::string& text) {
  auto ip = ParseIpAddress(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress{});
}

TEST(AllowEntry, PortIs443UnlessNamedAndCaseIsFolded) {
  const AllowEntry plain = Entry("API.Example.org");
  EXPECT_EQ(plain.host, "api.example.org");
  EXPECT_EQ(plain.port, 443);
  EXPECT_FALSE(plain.wildcard);
  const AllowEntry wild = Entry("*.files.example.org:8443");
  EXPECT_EQ(wild.host, "files.example.org");
  EXPECT_EQ(wild.port, 8443);
  EXPECT_TRUE(wild.wildcard);
  EXPECT_EQ(FormatAllowEntry(wild), "*.files.example.org:8443");
}

TEST(AllowEntry, AddressesAndMalformedEntriesAreRefused) {
  for (const char* bad : {"10.0.0.1",       "10.0.0.1:443",
                          "[::1]:443",      "::1",
                          "127.1",          "0x7f.1",
                          "2130706433",     "a.0x10",
                          "localhost",      "a.localhost:80",
                          "a*.example.org", "*.*.example.org",
                          "example.org:0",  "example.org:65536",
                          "example.org:",   "",
                          ".example.org",   "example..org",
                          "-a.example.org", "a_b.example.org",
                          "example.org."}) {
    EXPECT_FALSE(ParseAllowEntry(bad).ok()) << bad;
  }
}

TEST(AllowEntry, ListNamesTheFailingEntry) {
  auto list = ParseAllowList({"a.example", "10.1.2.3"});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.error().where, "allow[1]");
  EXPECT_FALSE(ParseAllowList({}).ok());
}

TEST(AllowEntry, WildcardAdmitsSubdomainsOnlyNeverTheBareDomainOrASuffix) {
  const AllowEntry wild = Entry("*.example.org");
  EXPECT_TRUE(EntryAdmits(wild, "a.example.org", 443));
  EXPECT_TRUE(EntryAdmits(wild, "a.b.example.org", 443));
  EXPECT_FALSE(EntryAdmits(wild, "example.org", 443));
  EXPECT_FALSE(EntryAdmits(wild, "badexample.org", 443));
  EXPECT_FALSE(EntryAdmits(wild, ".example.org", 443));
  EXPECT_FALSE(EntryAdmits(wild, "a.example.org", 80));
  const AllowEntry exact = Entry("example.org:8080");
  EXPECT_TRUE(EntryAdmits(exact, "example.org", 8080));
  EXPECT_FALSE(EntryAdmits(exact, "example.org", 443));
  EXPECT_FALSE(EntryAdmits(exact, "a.example.org", 8080));
  EXPECT_FALSE(EntryAdmits(exact, "example.org.evil", 8080));
}

RC_GTEST_PROP(AllowEntry, AWildcardNeverAdmitsItsBaseAndAlwaysAdmitsOneMoreLabel, ()) {
  const auto label = [] {
    return rc::gen::container<std::string>(*rc::gen::inRange(1, 12), rc::gen::elementOf(std::string("abcxyz019")));
  };
  // The last label is letters only: a numeric or "0x" one reads as an address.
  const std::string tld =
      *rc::gen::container<std::string>(*rc::gen::inRange(1, 6), rc::gen::elementOf(std::string("abcxyz")));
  const std::string base = *label() + "." + tld;
  const std::string sub = *label();
  const uint16_t port = *rc::gen::inRange(1, 65536);
  const AllowEntry wild = Entry("*." + base + ":" + std::to_string(port));
  RC_ASSERT(!EntryAdmits(wild, base, port));
  RC_ASSERT(EntryAdmits(wild, sub + "." + base, port));
  RC_ASSERT(!EntryAdmits(wild, sub + base, port));
  RC_ASSERT(!EntryAdmits(wild, sub + "." + base, static_cast<uint16_t>(port == 1 ? 2 : port - 1)));
}

TEST(RequestHost, IsNormalizedAndNeverAnAddress) {
  EXPECT_EQ(NormalizeRequestHost("API.Example.ORG").value(), "api.example.org");
  EXPECT_EQ(NormalizeRequestHost("api.example.org.").value(), "api.example.org");
  for (const char* bad :
       {"127.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "[::1]", "::1", "[::ffff:10.0.0.1]", "localhost",
        "LOCALHOST.", "*.example.org", "a*b.example.org", "", ".", "a..b", "a b", "example.org..", "a:b"}) {
    EXPECT_FALSE(NormalizeRequestHost(bad).ok()) << bad;
  }
}

TEST(Address, EveryRefusedRangeIsNotPublic) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "this-network"},
      {"10.0.0.1", "RFC 1918"},
      {"172.16.0.1", "RFC 1918"},
      {"172.31.255.255", "RFC 1918"},
      {"192.168.0.1", "RFC 1918"},
      {"169.254.169.254", "metadata"},
      {"169.254.0.1", "link-local"},
      {"100.64.0.1", "CGNAT"},
      {"100.127.255.255", "CGNAT"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"198.18.0.1", "benchmarking"},
      {"198.19.255.255", "benchmarking"},
      {"192.0.2.1", "documentation"},
      {"203.0.113.9", "documentation"},
      {"::", "unspecified"},
      {"::1", "loopback"},
      {"fc00::1", "unique local"},
      {"fd12:3456::1", "unique local"},
      {"fe80::1", "link-local"},
      {"febf::1", "link-local"},
      {"ff02::1", "multicast"},
      {"ff05::1:3", "multicast"},
      {"::ffff:127.0.0.1", "IPv4-mapped loopback"},
      {"::ffff:10.1.2.3", "IPv4-mapped private"},
      {"::ffff:169.254.169.254", "IPv4-mapped link-local"},
      {"::127.0.0.1", "IPv4-compatible"},
      {"::8.8.8.8", "IPv4-compatible"},
      {"64:ff9b::7f00:1", "NAT64 loopback"},
      {"64:ff9b:1::1", "NAT64"},
      {"2001:db8::1", "documentation"},
      {"2002:7f00:1::1", "6to4"},
      {"2001:0:4136:e378::1", "Teredo"},
      {"100::1", "discard"},
      {"4000::1", "not global unicast"},
      {"fec0::1", "site-local"},
  };
  for (const auto& [text, reason] : cases) {
    const auto why = NonPublicReason(Ip(text));
    ASSERT_TRUE(why.has_value()) << text << " was judged public";
    EXPECT_NE(why->find(reason), std::string::npos) << text << ": " << *why;
  }
}

TEST(Address, GloballyRoutableAddressesArePublic) {
  // Judged, never contacted.
  for (const char* text :
       {"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "198.17.255.255",
        "198.20.0.0", "223.255.255.255", "2606:4700::1111", "2a00:1450::1", "::ffff:8.8.8.8", "64:ff9b::808:808"}) {
    EXPECT_EQ(NonPublicReason(Ip(text)), std::nullopt) << text;
  }
}

TEST(Address, TestRangesArePublicOnlyInsideTheBenchmarkingBlock) {
  const auto range = ParseTestPublicRange("198.19.7.0/24");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(NonPublicReason(Ip("198.19.7.2"), {range.value()}), std::nullopt);
  EXPECT_EQ(NonPublicReason(Ip("::ffff:198.19.7.2"), {range.value()}), std::nullopt);
  EXPECT_TRUE(NonPublicReason(Ip("198.19.8.2"), {range.value()}).has_value());
  EXPECT_TRUE(NonPublicReason(Ip("127.0.0.1"), {range.value()}).has_value());
  for (const char* bad : {"127.0.0.0/8", "10.0.0.0/8", "169.254.169.254/32", "0.0.0.0/0", "198.16.0.0/14",
                          "198.18.0.0/14", "::/0", "198.18.0.1/15", "198.18.0.0", "198.18.0.0/33", "x/8"}) {
    EXPECT_FALSE(ParseTestPublicRange(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseTestPublicRange("198.18.0.0/15").ok());
}

// An IPv4 address and its IPv4-mapped IPv6 form are judged alike.
RC_GTEST_PROP(Address, MappedIpv4IsJudgedLikeIpv4, ()) {
  const auto a = *rc::gen::arbitrary<uint8_t>(), b = *rc::gen::arbitrary<uint8_t>(), c = *rc::gen::arbitrary<uint8_t>(),
             d = *rc::gen::arbitrary<uint8_t>();
  const IpAddress v4 = Ipv4(a, b, c, d);
  IpAddress mapped;
  mapped.v4 = false;
  mapped.bytes[10] = mapped.bytes[11] = 0xff;
  mapped.bytes[12] = a, mapped.bytes[13] = b, mapped.bytes[14] = c, mapped.bytes[15] = d;
  RC_ASSERT(NonPublicReason(v4).has_value() == NonPublicReason(mapped).has_value());
  // Private, loopback and link-local blocks are never public.
  if (a == 10 || a == 127 || (a == 169 && b == 254) || (a == 192 && b == 168) || (a == 172 && (b & 0xf0) == 16) ||
      a == 0 || a >= 224 || (a == 100 && (b & 0xc0) == 64))
    RC_ASSERT(NonPublicReason(v4).has_value());
}

RC_GTEST_PROP(Address, IPv6OutsideGlobalUnicastIsNeverPublic, ()) {
  IpAddress ip;
  ip.v4 = false;
  for (auto& byte : ip.bytes) byte = *rc::gen::arbitrary<uint8_t>();
  RC_PRE((ip.bytes[0] & 0xe0) != 0x20);
  const bool mapped_or_nat64 = std::all_of(ip.bytes.begin(), ip.bytes.begin() + 10, [](uint8_t x) { return x == 0; }) ||
                               (ip.bytes[0] == 0 && ip.bytes[1] == 0x64);
  RC_PRE(!mapped_or_nat64);
  RC_ASSERT(NonPublicReason(ip).has_value());
}

TEST(Cidr, ParsesAndMatches) {
  const auto c = ParseCidr("fc00::/7");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(InCidr(Ip("fdff::1"), c.value()));
  EXPECT_FALSE(InCidr(Ip("fe00::1"), c.value()));
  EXPECT_FALSE(InCidr(Ip("10.0.0.1"), c.value()));
  EXPECT_EQ(ParseCidr("10.0.0.0/8").value().ToString(), "10.0.0.0/8");
  EXPECT_TRUE(InCidr(Ip("1.2.3.4"), ParseCidr("0.0.0.0/0").value()));
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/", "10.0.0.0/-1", "/8", "10.0.0.0/129", "fc00::/129"})
    EXPECT_FALSE(ParseCidr(bad).ok()) << bad;
}

}  // namespace
}  // namespace oarbank::egress
