// What the policy (JSON) and manifest (TOML) parsers share: an error that
// names the culprit's path, and the unknown-key check. Each parser keeps its
// own walk over its format's nodes and its own type names.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "sandbox/common/expected.h"

namespace oarbank {

inline Error Bad(std::string where, std::string what) { return Error{std::move(where), std::move(what)}; }

// A key as it appears in an error's `where`: the empty key is shown as ""
// so that the culprit is never blank.
inline std::string KeyName(std::string_view key) { return key.empty() ? "\"\"" : std::string(key); }

// `key` of the object at `prefix` unless it is one of `known`: then an error
// naming it and listing the known ones ("unknown field (known: a, b)";
// `noun` is what the format calls a key).
inline std::optional<Error> UnknownKey(std::string_view key, const std::string& prefix,
                                       std::initializer_list<std::string_view> known, std::string_view noun) {
  if (std::find(known.begin(), known.end(), key) != known.end()) return std::nullopt;
  std::string list;
  for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  return Bad(prefix + KeyName(key), "unknown " + std::string(noun) + " (known: " + list + ")");
}

}  // namespace oarbank
