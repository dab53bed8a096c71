#include "sandbox/egress/request.h"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace oarbank::egress {
namespace {

Error Bad(std::string what) { return Error{"request", std::move(what)}; }

bool IsTokenChar(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); });
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<uint16_t> ParsePortText(std::string_view s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int port = std::stoi(std::string(s));
  if (port < 1 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

// "host:port" or "[v6]:port"; the port is optional when default_port is set.
Expected<std::pair<std::string, uint16_t>> ParseAuthority(std::string_view a, std::optional<uint16_t> default_port) {
  if (a.empty()) return Bad("empty host");
  if (a.find('@') != std::string_view::npos) return Bad("userinfo ('@') in the request target");
  std::string_view host = a, port_text;
  bool has_port = false;
  if (a.front() == '[') {
    const auto close = a.find(']');
    if (close == std::string_view::npos) return Bad("unterminated '[' in the request target");
    host = a.substr(0, close + 1);
    const std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Bad("malformed request target");
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (const auto colon = a.rfind(':'); colon != std::string_view::npos) {
    host = a.substr(0, colon);
    port_text = a.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) return Bad("empty host");
  for (char c : host)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == '/' || c == '\\')
      return Bad("malformed host in the request target");
  uint16_t port = 0;
  if (has_port) {
    auto p = ParsePortText(port_text);
    if (!p) return Bad("expected a port 1..65535 in the request target");
    port = *p;
  } else if (default_port) {
    port = *default_port;
  } else {
    return Bad("CONNECT needs host:port");
  }
  return std::pair{std::string(host), port};
}

// The headers the request sent upstream is framed or addressed by: never
// droppable through Connection.
constexpr std::string_view kFramingHeaders[] = {"Content-Length", "Transfer-Encoding", "Host"};

// The comma-separated tokens of a Connection value, trimmed, empty ones skipped.
std::vector<std::string> ConnectionTokens(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    auto comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view token = value.substr(start, comma - start);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (!token.empty()) out.emplace_back(token);
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::optional<size_t> FindHeadEnd(std::string_view buf) {
  const auto end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  return end + 4;
}

namespace {

// The head's CRLF lines, without the empty one that closes it; a bare CR
// or LF anywhere, or an empty line inside, is refused.
Expected<std::vector<std::string_view>> SplitHead(std::string_view head) {
  // Split into CRLF lines; a bare CR or LF anywhere is refused.
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < head.size()) {
    const auto crlf = head.find("\r\n", pos);
    if (crlf == std::string_view::npos) return Bad("line without CRLF");
    const std::string_view line = head.substr(pos, crlf - pos);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      return Bad("bare CR or LF in the request head");
    lines.push_back(line);
    pos = crlf + 2;
  }
  // lines ends with the empty line that closes the head.
  if (lines.size() < 2 || !lines.back().empty()) return Bad("incomplete request head");
  lines.pop_back();
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].empty()) return Bad("empty line inside the request head");
  return lines;
}

// The request line: METHOD TARGET HTTP/1.x, and the target as CONNECT's
// host:port or a plain request's absolute http:// URL.
std::optional<Error> ParseRequestLine(std::string_view request_line, ProxyRequest& req) {
  const auto sp1 = request_line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || request_line.find(' ', sp2 + 1) != std::string_view::npos)
    return Bad("expected 'METHOD TARGET HTTP/1.x'");
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (!IsToken(method)) return Bad("malformed method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return Bad("expected HTTP/1.0 or HTTP/1.1");
  if (target.empty()) return Bad("empty request target");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return Bad("control or non-ASCII byte in the request target");
  req.method = method;
  req.version = version;

  if (method == "CONNECT") {
    req.kind = RequestKind::kConnect;
    if (target.find('/') != std::string_view::npos) return Bad("CONNECT needs host:port");
    auto authority = ParseAuthority(target, std::nullopt);
    if (!authority.ok()) return authority.error();
    std::tie(req.host, req.port) = authority.value();
  } else {
    req.kind = RequestKind::kPlainHttp;
    if (target.front() == '/' || target == "*") return Bad("not a proxy request: expected an absolute http:// URL");
    constexpr std::string_view kHttp = "http://", kHttps = "https://";
    if (target.size() >= kHttps.size() && EqualsIgnoreCase(target.substr(0, kHttps.size()), kHttps))
      return Bad("https:// URLs go through CONNECT");
    if (target.size() < kHttp.size() || !EqualsIgnoreCase(target.substr(0, kHttp.size()), kHttp))
      return Bad("only http:// URLs (and CONNECT) are proxied");
    const std::string_view rest = target.substr(kHttp.size());
    const auto path_start = rest.find_first_of("/?#");
    auto authority = ParseAuthority(rest.substr(0, path_start), uint16_t{80});
    if (!authority.ok()) return authority.error();
    std::tie(req.host, req.port) = authority.value();
    std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start);
    if (const auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
    req.target_path = path.empty() || path.front() != '/' ? "/" + std::string(path) : std::string(path);
  }
  return std::nullopt;
}

// The header lines: names and values checked, one Content-Length at most
// and never with Transfer-Encoding, and no Connection header naming what
// frames or addresses the request.
std::optional<Error> ParseHeaders(const std::vector<std::string_view>& lines, ProxyRequest& req) {
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') return Bad("obsolete line folding in a header");
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return Bad("header line without ':'");
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Bad("malformed header name");
    std::string_view value = line.substr(colon + 1);
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return Bad("control byte in a header value");
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (EqualsIgnoreCase(name, "Content-Length")) {
      if (req.content_length) return Bad("more than one Content-Length");
      if (value.empty() || value.size() > 15 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return Bad("malformed Content-Length");
      req.content_length = std::stoull(std::string(value));
    }
    if (EqualsIgnoreCase(name, "Transfer-Encoding")) req.transfer_encoding = true;
    req.headers.emplace_back(std::string(name), std::string(value));
  }
  if (req.content_length && req.transfer_encoding) return Bad("both Content-Length and Transfer-Encoding");
  // A Connection header names the headers a hop drops. One naming a header
  // the upstream request is framed or addressed by would make the request
  // sent differ from the request checked (drop Content-Length and the body
  // becomes a second request head): refused.
  for (const auto& [name, value] : req.headers) {
    if (!EqualsIgnoreCase(name, "Connection")) continue;
    for (const auto& token : ConnectionTokens(value)) {
      for (std::string_view framing : kFramingHeaders)
        if (EqualsIgnoreCase(token, framing))
          return Bad("Connection names " + std::string(framing) + ", which frames or addresses the request");
    }
  }
  return std::nullopt;
}

}  // namespace

Expected<ProxyRequest> ParseProxyRequest(std::string_view head) {
  if (head.size() < 4 || !head.ends_with("\r\n\r\n")) return Bad("incomplete request head");
  auto lines = SplitHead(head);
  if (!lines.ok()) return lines.error();
  ProxyRequest req;
  if (auto e = ParseRequestLine(lines.value()[0], req)) return *e;
  if (auto e = ParseHeaders(lines.value(), req)) return *e;
  return req;
}

std::string UpstreamHead(const ProxyRequest& req) {
  // Hop-by-hop and proxy headers, plus every header the Connection header names.
  std::vector<std::string> drop = {
      "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate", "te",
      "trailer",    "upgrade",          "host"};
  for (const auto& [name, value] : req.headers) {
    if (!EqualsIgnoreCase(name, "Connection")) continue;
    for (auto token : ConnectionTokens(value)) {
      std::transform(token.begin(), token.end(), token.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      drop.push_back(token);
    }
  }
  std::string out = req.method + " " + req.target_path + " " + req.version + "\r\n";
  out += "Host: " + req.host + (req.port == 80 ? "" : ":" + std::to_string(req.port)) + "\r\n";
  for (const auto& header : req.headers) {
    const bool dropped =
        std::any_of(drop.begin(), drop.end(), [&](const std::string& d) { return EqualsIgnoreCase(header.first, d); });
    if (!dropped) out += header.first + ": " + header.second + "\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

}  // namespace oarbank::egress
