// How a job's output travels in a JSON result: as text when it is valid
// UTF-8, otherwise losslessly as base64 (RFC 4648, with padding; nettle's
// encoder, from the libnettle.a the agent links for SHA-256), with a field
// saying which.
#pragma once

#include <nettle/base64.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace oarbank {

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
// U+10FFFF, no sequence cut short (a cap may cut a character in two).
inline bool IsUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf)
      len = 2;
    else if (c == 0xe0)
      len = 3, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
      len = 3;
    else if (c == 0xed)
      len = 3, hi = 0x9f;
    else if (c == 0xf0)
      len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3)
      len = 4;
    else if (c == 0xf4)
      len = 4, hi = 0x8f;
    else
      return false;
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return false;
    i += len;
  }
  return true;
}

inline std::string Base64(std::string_view s) {
  std::string out(BASE64_ENCODE_RAW_LENGTH(s.size()), '\0');
  base64_encode_raw(out.data(), s.size(), reinterpret_cast<const uint8_t*>(s.data()));
  return out;
}

}  // namespace oarbank
