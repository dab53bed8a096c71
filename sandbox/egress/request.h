// The egress proxy's request parser: one HTTP/1.x request head, either
// CONNECT host:port (authority-form) or an absolute-form plain HTTP request
// (GET http://host[:port]/path). Pure code; the fuzz target
// (sandbox/egress/request_fuzz.cc) drives it with arbitrary bytes.
//
// It is strict on purpose, because a lenient parser is where request
// smuggling lives: CRLF line ends only, no obs-fold, no control bytes, one
// Content-Length, never Content-Length with Transfer-Encoding, no Connection
// header naming Content-Length, Transfer-Encoding or Host (a hop would drop
// them, and the body it still forwards would frame a second request), no
// userinfo in the URL, no origin-form (a request for the proxy itself) and no https://
// absolute-form (https goes through CONNECT). Any Error is a 400 whose
// `what` is the one-line reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank::egress {

enum class RequestKind { kConnect, kPlainHttp };

struct ProxyRequest {
  RequestKind kind = RequestKind::kConnect;
  std::string method;
  std::string host;                                          // as written (the proxy normalizes and checks it)
  uint16_t port = 0;                                         // CONNECT: required; plain HTTP: 80 by default
  std::string target_path;                                   // plain HTTP: origin-form path and query, "/" at least
  std::string version;                                       // "HTTP/1.0" or "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names as written
  std::optional<uint64_t> content_length;
  bool transfer_encoding = false;  // any Transfer-Encoding header
};

// Offset just past the "\r\n\r\n" that ends the head in `buf`, or nullopt.
std::optional<size_t> FindHeadEnd(std::string_view buf);

// Parses a complete head (request line, header lines, the empty line).
Expected<ProxyRequest> ParseProxyRequest(std::string_view head);

// The head sent upstream for a plain HTTP request: origin-form request line,
// hop-by-hop and proxy headers dropped, Host set to the target and
// "Connection: close" (one request per upstream connection).
std::string UpstreamHead(const ProxyRequest& request);

}  // namespace oarbank::egress
