// SHA-256 from nettle (Debian's nettle-dev, linked from libnettle.a so the
// static oarbank-agent needs no shared library): the approval digest of a
// manifest's requests, and the identity of a launcher binary that a battery
// attestation binds. sha256_test.cc checks the wrapper against the FIPS
// vectors and against coreutils' sha256sum.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace oarbank {

std::string Sha256Hex(std::string_view data);  // 64 lower-case hex digits

// The digest of everything readable from `fd` (read from its current
// offset to the end); nullopt when a read fails.
std::optional<std::string> Sha256HexOfFd(int fd);

}  // namespace oarbank
