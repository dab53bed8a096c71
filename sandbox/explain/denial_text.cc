// How a refusal is written: the proxy's log line read as one, JSON, and
// the lines for a terminal (escaped: every path comes from the job).
#include <cstdio>
#include <string>

#include "sandbox/explain/explain.h"

namespace oarbank {
namespace {

// A raw line kept as an example: the job chooses its length.
constexpr size_t kMaxExample = 512;

}  // namespace

std::optional<Denial> ExplainProxyRefusal(const std::string& log_line, Speaker speaker) {
  const auto event = nlohmann::json::parse(log_line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || event.value("event", "") != "egress_refused") return std::nullopt;
  Denial d;
  d.kind = "proxy";
  d.syscall = event.value("method", "");
  d.err = std::to_string(event.value("status", 0));
  const std::string host = event.value("host", "");
  const int port = event.value("port", 0);
  d.target = host.empty() ? "(no host)" : port != 0 ? host + ":" + std::to_string(port) : host;
  d.denied_by = "egress proxy";
  d.why = event.value("reason", "refused");
  d.example = log_line.substr(0, kMaxExample);
  // Only a host the allowlist lacks can be granted; a refused address
  // (private, loopback, the host's own), a malformed or smuggled request
  // and a limit never can.
  if (d.why.find("is not in the allowlist") != std::string::npos && !host.empty()) {
    const std::string entry = port == 443 || port == 0 ? host : host + ":" + std::to_string(port);
    switch (speaker) {
      case Speaker::kManifest: d.grant = "net.allow = [\"" + entry + "\"]"; break;
      case Speaker::kPolicy: d.grant = "\"net\": {\"allow\": [..., \"" + entry + "\"]}"; break;
      case Speaker::kCage: d.grant = "--allow " + entry; break;
    }
  }
  return d;
}

std::string EscapeControl(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

nlohmann::ordered_json DenialJson(const Denial& d) {
  return {{"kind", d.kind},
          {"process", d.process},
          {"syscall", d.syscall},
          {"errno", d.err},
          {"target", d.target},
          {"access", d.access},
          {"denied_by", d.denied_by},
          {"grant", d.grant.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.grant)},
          {"explanation", d.why},
          {"count", d.count},
          {"example", d.example.substr(0, kMaxExample)}};
}

namespace {

std::string What(const Denial& d) {
  if (d.kind == "file") return d.access + " " + d.target;
  if (d.kind == "socket") return "socket(" + d.target + ")";
  if (d.kind == "connect") return "connect to " + d.target;
  if (d.kind == "send") return "send to " + d.target;
  if (d.kind == "signal") return "syscall " + d.target + " killed";
  if (d.kind == "proxy") return "proxy request for " + d.target;
  return "syscall " + d.target;
}

}  // namespace

std::string DenialText(const Denial& d) {
  std::string line = EscapeControl(What(d) + " (" + d.syscall + ", " + d.err + ", " + d.denied_by + ")" +
                                   (d.count > 1 ? " x" + std::to_string(d.count) : "")) +
                     "\n      " + EscapeControl(d.why);
  line += d.grant.empty() ? "\n      grant: none can allow it"
                          : "\n      grant that would allow it: " + EscapeControl(d.grant);
  return line;
}

std::string DenialLine(const Denial& d) {
  std::string line = "refused " + What(d) + (d.process.empty() ? "" : " by " + d.process) + " (" + d.denied_by +
                     (d.count > 1 ? ", x" + std::to_string(d.count) : "") + "): " + d.why + "; ";
  line += d.grant.empty() ? "nothing allows it" : "to allow it: " + d.grant;
  return EscapeControl(line);
}

}  // namespace oarbank
