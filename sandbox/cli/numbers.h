// Strict parsing of the numbers the command line takes: every numeric
// option is range-checked and a bad value is refused (exit 64, one line
// naming the option), never read as "none" or "no cap". NaN, infinities,
// signs where none belongs, trailing text and overflow are refused.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

// "0.01", "1e+07": a bound as the message shows it.
inline std::string NumberText(double v) {
  char text[32];
  snprintf(text, sizeof text, "%g", v);
  return text;
}

// A finite decimal number, the whole text; nullopt otherwise.
inline std::optional<double> ParseFinite(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A number in [lo, hi]; with `zero_means_none`, 0 as well (below lo).
inline CLI::Validator FiniteRange(double lo, double hi, bool zero_means_none = false) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const auto v = ParseFinite(text);
        if (!v) return "expected a finite number, got \"" + text + "\"";
        if (zero_means_none && *v == 0) return "";
        if (*v < lo || *v > hi)
          return "expected " + std::string(zero_means_none ? "0 (none) or " : "") + NumberText(lo) + ".." +
                 NumberText(hi) + ", got " + text;
        return "";
      },
      "NUMBER in [" + NumberText(lo) + ", " + NumberText(hi) + "]");
}

// A byte count: decimal digits, then optionally K, KiB, M, MiB, G, GiB (all
// powers of 1024), at most `max`. `why` names what is wrong.
inline std::optional<uint64_t> ParseByteCount(const std::string& text, uint64_t max, std::string* why) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) {
      *why = "too large, got " + text;
      return std::nullopt;
    }
    v = v * 10 + digit;
    ++i;
  }
  if (i == 0) {
    *why = "expected a byte count (digits, then K, KiB, M, MiB, G or GiB), got \"" + text + "\"";
    return std::nullopt;
  }
  const std::string unit = text.substr(i);
  uint64_t scale = 1;
  if (unit == "K" || unit == "KiB")
    scale = 1ull << 10;
  else if (unit == "M" || unit == "MiB")
    scale = 1ull << 20;
  else if (unit == "G" || unit == "GiB")
    scale = 1ull << 30;
  else if (!unit.empty()) {
    *why = "expected a byte count (digits, then K, KiB, M, MiB, G or GiB), got \"" + text + "\"";
    return std::nullopt;
  }
  if (v > max / scale) {
    *why = "at most " + std::to_string(max) + " bytes, got " + text;
    return std::nullopt;
  }
  return v * scale;
}

}  // namespace oarbank
