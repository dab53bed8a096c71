#include "sandbox/common/sha256.h"

#include <nettle/sha2.h>
#include <unistd.h>

#include <cerrno>

namespace oarbank {
namespace {

std::string Hex(const uint8_t (&digest)[SHA256_DIGEST_SIZE]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * SHA256_DIGEST_SIZE);
  for (uint8_t b : digest) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 0xf]);
  }
  return hex;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, sizeof digest, digest);
  return Hex(digest);
}

std::optional<std::string> Sha256HexOfFd(int fd) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  static thread_local uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    sha256_update(&ctx, static_cast<size_t>(n), chunk);
  }
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, sizeof digest, digest);
  return Hex(digest);
}

}  // namespace oarbank
