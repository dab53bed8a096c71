// Whether one path lies inside a directory, by their text alone.
//
// Both paths must be absolute and lexically normal: no "." or ".."
// component, no doubled slash, no trailing slash except in "/" itself (what
// realpath(3) returns, or std::filesystem's lexically_normal() with the
// trailing slash dropped). Nothing is resolved here: a symbolic link on the
// way is the caller's to resolve first. A component is compared whole, so
// "/a/bc" is not inside "/a/b", and "/" holds every absolute path.
#pragma once

#include <string_view>

namespace oarbank {

// `path` is `dir` itself or lies somewhere under it.
inline bool IsAtOrBelow(std::string_view path, std::string_view dir) {
  if (dir == "/") return path.starts_with('/');
  return path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
}

// `path` lies under `dir` and is not `dir` itself.
inline bool IsStrictlyBelow(std::string_view path, std::string_view dir) {
  return path.size() > dir.size() && IsAtOrBelow(path, dir);
}

}  // namespace oarbank
