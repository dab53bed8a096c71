// SHA-256 (FIPS 180-4), for the approval digest of a manifest's requests.
// Implemented here rather than linked from libcrypto so that the statically
// linked oarbank-agent (which refuses an unapproved manifest) needs no
// dlopen-capable library; sha256_test.cc checks it against the FIPS vectors
// and against OpenSSL's EVP on random inputs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace oarbank {

std::array<uint8_t, 32> Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);  // 64 lower-case hex digits

}  // namespace oarbank
