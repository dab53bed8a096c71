// Reads a small text file (a policy, a manifest, a /proc or /sys knob) in
// chunks, stopping just past `max_bytes` so the caller's parser refuses an
// oversized file by its size. Chunks, not a buffer of max_bytes: zero-filling
// the limit up front costs more than the rest of a launch. Plain read(2):
// a launch pays for every page of code it touches, and iostreams bring many.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

namespace oarbank {

// nullopt when the file cannot be opened or read.
inline std::optional<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char chunk[16384];
  while (text.size() <= max_bytes) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace oarbank
