// The egress proxy's decisions, in pure code: which host names and ports a
// job's net.allow admits, and which addresses count as public.
//
// Security consequences:
// - An entry names a host, never an address. "*.example.org" admits every
//   subdomain of example.org, never example.org itself (list both to admit
//   both). The port is 443 unless the entry names one.
// - A request host is checked with the policy's own CheckAllowEntry, so an
//   IP literal in any spelling inet_aton reads ("127.1", "0x7f.1",
//   "2130706433"), "localhost" and "*" are refused before any lookup.
// - An address is public only if it is globally routable: IPv4 outside every
//   special-purpose block of the IANA registry, IPv6 inside 2000::/3 and
//   outside its special-purpose blocks; an IPv4-mapped (::ffff:a.b.c.d) or
//   NAT64 (64:ff9b::a.b.c.d) address is judged by the IPv4 address it
//   carries, and the deprecated IPv4-compatible (::a.b.c.d), 6to4 and Teredo
//   forms, which also carry one, are refused outright.
// - Tests may declare ranges public (test_public), but only inside the
//   benchmarking block 198.18.0.0/15 (RFC 2544), which no real host uses:
//   a test setting can never open loopback, RFC 1918 or 169.254.169.254.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank::egress {

inline constexpr uint16_t kDefaultAllowPort = 443;

struct AllowEntry {
  std::string host;       // lower-case, without the "*." prefix
  bool wildcard = false;  // "*.host": strict subdomains only
  uint16_t port = kDefaultAllowPort;
};

// Parses one entry ("api.example.org", "*.files.example.org:8443"); upper
// case is folded. Error.where is empty: callers name the field.
Expected<AllowEntry> ParseAllowEntry(std::string_view entry);

// Parses a list, naming the failing entry "allow[i]" in Error.where.
Expected<std::vector<AllowEntry>> ParseAllowList(const std::vector<std::string>& entries);

std::string FormatAllowEntry(const AllowEntry& entry);

// Whether the (normalized) host and port are admitted by `entry` / by the list.
bool EntryAdmits(const AllowEntry& entry, std::string_view host, uint16_t port);
bool ListAdmits(const std::vector<AllowEntry>& list, std::string_view host, uint16_t port);

// A request's host as the proxy matches and resolves it: lower case, one
// trailing dot dropped; an IP literal, "localhost" or a malformed name is an
// Error whose `what` is the one-line reason.
Expected<std::string> NormalizeRequestHost(std::string_view host);

// An IPv4 or IPv6 address; IPv4 lives in bytes[0..3].
struct IpAddress {
  bool v4 = true;
  std::array<uint8_t, 16> bytes{};
  std::string ToString() const;
  bool operator==(const IpAddress&) const = default;
};

// Strict numeric forms only (inet_pton): "198.18.0.2", "2001:db8::1".
std::optional<IpAddress> ParseIpAddress(std::string_view text);
IpAddress Ipv4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

struct Cidr {
  IpAddress base;  // host bits cleared
  int prefix = 0;
  std::string ToString() const;
};

// "198.18.0.0/15", "fc00::/7"; host bits must be zero.
Expected<Cidr> ParseCidr(std::string_view text);
bool InCidr(const IpAddress& address, const Cidr& cidr);

// The test-only "declare this range public": a CIDR inside 198.18.0.0/15.
Expected<Cidr> ParseTestPublicRange(std::string_view text);

// nullopt if `address` is public (or inside a test_public range), else the
// reason, e.g. "loopback (127.0.0.0/8)".
std::optional<std::string> NonPublicReason(const IpAddress& address, const std::vector<Cidr>& test_public = {});

// The tables NonPublicReason decides by, for a packet filter that must refuse
// exactly the same addresses (job_ruleset.h): the IPv4 blocks, and the
// blocks inside 2000::/3 that are not public. Outside 2000::/3 only
// ::ffff:0:0/96 (IPv4-mapped) and 64:ff9b::/96 (NAT64) can be public, by
// the IPv4 address they carry.
std::vector<Cidr> NonPublicIpv4Blocks();
std::vector<Cidr> NonPublicIpv6GlobalBlocks();

}  // namespace oarbank::egress
