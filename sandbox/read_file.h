// Reads a small text file (a policy, a manifest) in chunks, stopping just
// past `max_bytes` so the caller's parser refuses an oversized file by its
// size. Chunks, not a buffer of max_bytes: zero-filling the limit up front
// costs more than the rest of a launch.
#pragma once

#include <fstream>
#include <optional>
#include <string>

namespace oarbank {

// nullopt when the file cannot be opened.
inline std::optional<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  char chunk[16384];
  while (text.size() <= max_bytes && (in.read(chunk, sizeof chunk) || in.gcount() > 0))
    text.append(chunk, static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace oarbank
