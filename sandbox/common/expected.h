// Errors are values that name the culprit: a JSON path in a policy
// ("net.proxy_port") or a capability id ("ipc.scoping"), and what was
// expected. The first error wins; callers never continue past one.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace oarbank {

struct Error {
  std::string where;  // JSON path, capability id or launch step
  std::string what;   // what was expected or what went wrong
};

// The `where` of an Error that a shortage of the host's resources caused
// (descriptors, memory, processes), not the input: a caller that would
// refuse bad input with 64 refuses this with 70, as any part of a cage that
// cannot be set up.
inline constexpr char kResourceShortage[] = "resources";
inline bool IsResourceShortage(int err) {
  return err == EMFILE || err == ENFILE || err == ENOMEM || err == EAGAIN || err == ENOBUFS;
}

// A value or the first error that prevented it. Deliberately tiny: C++20 has
// no std::expected (C++23's, whose name it takes; cage::Result in
// <oarbank/cage.h> is the public outcome of a job, a different thing).
// [[nodiscard]]: an error dropped unread would be a step skipped silently.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const Error& error() const { return std::get<Error>(v_); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace oarbank
