#include "sandbox/egress/allowlist.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "sandbox/policy/policy.h"

namespace oarbank::egress {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

struct Block {
  const char* cidr;
  const char* reason;
};

// IPv4 blocks that are not globally reachable (IANA IPv4 Special-Purpose
// Address Registry, plus multicast and the reserved 240/4), most specific
// reason first where blocks nest.
constexpr Block kIpv4Blocks[] = {
    {"255.255.255.255/32", "broadcast"},
    {"0.0.0.0/8", "unspecified or this-network"},
    {"10.0.0.0/8", "private (RFC 1918)"},
    {"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local (incl. the 169.254.169.254 metadata service)"},
    {"172.16.0.0/12", "private (RFC 1918)"},
    {"192.0.0.0/24", "IETF protocol assignments"},
    {"192.0.2.0/24", "documentation (TEST-NET-1)"},
    {"192.88.99.0/24", "6to4 relay anycast"},
    {"192.168.0.0/16", "private (RFC 1918)"},
    {"198.18.0.0/15", "benchmarking (RFC 2544)"},
    {"198.51.100.0/24", "documentation (TEST-NET-2)"},
    {"203.0.113.0/24", "documentation (TEST-NET-3)"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
};

// IPv6: only 2000::/3 is global unicast; inside it these are not public.
constexpr Block kIpv6Blocks[] = {
    {"2001::/32", "Teredo (carries an IPv4 address)"},
    {"2001::/23", "IETF protocol assignments"},
    {"2001:db8::/32", "documentation"},
    {"2002::/16", "6to4 (carries an IPv4 address)"},
    {"3fff::/20", "documentation"},
};

// Outside 2000::/3, for the reason only.
constexpr Block kIpv6Named[] = {
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"::/96", "IPv4-compatible (deprecated)"},
    {"64:ff9b:1::/48", "local-use NAT64"},
    {"100::/64", "discard-only"},
    {"fc00::/7", "unique local (ULA)"},
    {"fe80::/10", "link-local"},
    {"fec0::/10", "site-local (deprecated)"},
    {"ff00::/8", "multicast"},
};

template <size_t N>
std::vector<std::pair<Cidr, const char*>> Compile(const Block (&blocks)[N]) {
  std::vector<std::pair<Cidr, const char*>> out;
  for (const auto& b : blocks) out.emplace_back(ParseCidr(b.cidr).value(), b.reason);
  return out;
}

const auto& Ipv4Blocks() {
  static const auto blocks = Compile(kIpv4Blocks);
  return blocks;
}
const auto& Ipv6Blocks() {
  static const auto blocks = Compile(kIpv6Blocks);
  return blocks;
}
const auto& Ipv6Named() {
  static const auto blocks = Compile(kIpv6Named);
  return blocks;
}

std::optional<std::string> Ipv4Reason(const IpAddress& a, const std::vector<Cidr>& test_public) {
  for (const auto& range : test_public)
    if (InCidr(a, range)) return std::nullopt;
  for (const auto& [cidr, reason] : Ipv4Blocks())
    if (InCidr(a, cidr)) return std::string(reason) + " (" + cidr.ToString() + ")";
  return std::nullopt;
}

IpAddress EmbeddedIpv4(const IpAddress& a) { return Ipv4(a.bytes[12], a.bytes[13], a.bytes[14], a.bytes[15]); }

bool HasPrefix(const IpAddress& a, std::initializer_list<uint8_t> prefix) {
  return std::equal(prefix.begin(), prefix.end(), a.bytes.begin());
}

}  // namespace

Expected<AllowEntry> ParseAllowEntry(std::string_view text) {
  const std::string entry = Lower(text);
  if (auto why = CheckAllowEntry(entry)) return Error{"", *why};
  AllowEntry out;
  std::string host = entry;
  if (const auto colon = entry.rfind(':'); colon != std::string::npos) {
    host = entry.substr(0, colon);
    out.port = static_cast<uint16_t>(std::stoi(entry.substr(colon + 1)));  // checked 1..65535 above
  }
  if (host.rfind("*.", 0) == 0) {
    out.wildcard = true;
    host = host.substr(2);
  }
  out.host = host;
  return out;
}

Expected<std::vector<AllowEntry>> ParseAllowList(const std::vector<std::string>& entries) {
  std::vector<AllowEntry> out;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto e = ParseAllowEntry(entries[i]);
    if (!e.ok()) return Error{"allow[" + std::to_string(i) + "]", e.error().what};
    out.push_back(e.value());
  }
  if (out.empty()) return Error{"allow", "expected at least one host[:port]"};
  return out;
}

std::string FormatAllowEntry(const AllowEntry& e) {
  return (e.wildcard ? "*." : "") + e.host + ":" + std::to_string(e.port);
}

bool EntryAdmits(const AllowEntry& e, std::string_view host, uint16_t port) {
  if (port != e.port) return false;
  if (!e.wildcard) return host == e.host;
  // Strict subdomain: "<at least one label>.<e.host>".
  return host.size() > e.host.size() + 1 && host.ends_with(e.host) && host[host.size() - e.host.size() - 1] == '.';
}

bool ListAdmits(const std::vector<AllowEntry>& list, std::string_view host, uint16_t port) {
  return std::any_of(list.begin(), list.end(), [&](const AllowEntry& e) { return EntryAdmits(e, host, port); });
}

Expected<std::string> NormalizeRequestHost(std::string_view raw) {
  std::string host = Lower(raw);
  if (host.empty()) return Error{"host", "empty host"};
  if (host.front() == '[' || ParseIpAddress(host))
    return Error{"host", "IP literal: only listed host names are reachable"};
  if (host.size() > 1 && host.back() == '.') host.pop_back();
  if (host.find(':') != std::string::npos) return Error{"host", "malformed host name"};
  if (host.rfind("*.", 0) == 0 || host.find('*') != std::string::npos) return Error{"host", "'*' in a host name"};
  if (auto why = CheckAllowEntry(host)) return Error{"host", *why};
  return host;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v4 ? AF_INET : AF_INET6, bytes.data(), buf, sizeof buf);
  return buf;
}

IpAddress Ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IpAddress ip;
  ip.v4 = true;
  ip.bytes[0] = a;
  ip.bytes[1] = b;
  ip.bytes[2] = c;
  ip.bytes[3] = d;
  return ip;
}

std::optional<IpAddress> ParseIpAddress(std::string_view text) {
  if (text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);
  IpAddress ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
  ip.v4 = false;
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) return ip;
  return std::nullopt;
}

std::string Cidr::ToString() const { return base.ToString() + "/" + std::to_string(prefix); }

bool InCidr(const IpAddress& a, const Cidr& c) {
  if (a.v4 != c.base.v4) return false;
  int bits = c.prefix;
  for (size_t i = 0; bits > 0; ++i, bits -= 8) {
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a.bytes[i] & mask) != (c.base.bytes[i] & mask)) return false;
  }
  return true;
}

Expected<Cidr> ParseCidr(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return Error{"", "expected ADDRESS/PREFIX"};
  const auto base = ParseIpAddress(text.substr(0, slash));
  if (!base) return Error{"", "not an IP address: " + std::string(text.substr(0, slash))};
  const std::string_view len = text.substr(slash + 1);
  const int max = base->v4 ? 32 : 128;
  if (len.empty() || len.size() > 3 ||
      !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Error{"", "expected a prefix length 0.." + std::to_string(max)};
  const int prefix = std::stoi(std::string(len));
  if (prefix > max) return Error{"", "expected a prefix length 0.." + std::to_string(max)};
  Cidr c{*base, prefix};
  IpAddress masked = *base;
  for (int bit = prefix; bit < max; ++bit) masked.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  if (!(masked == *base)) return Error{"", "host bits set in " + std::string(text)};
  return c;
}

Expected<Cidr> ParseTestPublicRange(std::string_view text) {
  auto c = ParseCidr(text);
  if (!c.ok()) return c;
  static const Cidr benchmarking = ParseCidr("198.18.0.0/15").value();
  if (!c.value().base.v4 || c.value().prefix < benchmarking.prefix || !InCidr(c.value().base, benchmarking))
    return Error{"", "only a range inside 198.18.0.0/15 (benchmarking, RFC 2544) may be declared public"};
  return c;
}

std::vector<Cidr> NonPublicIpv4Blocks() {
  std::vector<Cidr> out;
  for (const auto& [cidr, reason] : Ipv4Blocks()) out.push_back(cidr);
  return out;
}

std::vector<Cidr> NonPublicIpv6GlobalBlocks() {
  std::vector<Cidr> out;
  for (const auto& [cidr, reason] : Ipv6Blocks()) out.push_back(cidr);
  return out;
}

std::optional<std::string> NonPublicReason(const IpAddress& a, const std::vector<Cidr>& test_public) {
  if (a.v4) return Ipv4Reason(a, test_public);
  // ::ffff:a.b.c.d reaches a.b.c.d; 64:ff9b::a.b.c.d reaches it through NAT64.
  const bool mapped = HasPrefix(a, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff});
  const bool nat64 = HasPrefix(a, {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0});
  if (mapped || nat64) {
    if (auto why = Ipv4Reason(EmbeddedIpv4(a), test_public))
      return std::string(mapped ? "IPv4-mapped " : "NAT64 ") + *why;
    return std::nullopt;
  }
  if ((a.bytes[0] & 0xe0) != 0x20) {
    for (const auto& [cidr, reason] : Ipv6Named())
      if (InCidr(a, cidr)) return std::string(reason) + " (" + cidr.ToString() + ")";
    return std::string("not global unicast (outside 2000::/3)");
  }
  for (const auto& [cidr, reason] : Ipv6Blocks())
    if (InCidr(a, cidr)) return std::string(reason) + " (" + cidr.ToString() + ")";
  return std::nullopt;
}

}  // namespace oarbank::egress
