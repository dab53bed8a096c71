// The egress proxy's request parser: what it accepts, what it refuses with
// which reason, and what a plain HTTP request becomes upstream.
#include "sandbox/egress/request.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace oarbank::egress {
namespace {

TEST(ProxyRequest, ConnectNeedsHostAndPort) {
  auto r = ParseProxyRequest("CONNECT api.example.org:443 HTTP/1.1\r\nHost: api.example.org:443\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().what;
  EXPECT_EQ(r.value().kind, RequestKind::kConnect);
  EXPECT_EQ(r.value().host, "api.example.org");
  EXPECT_EQ(r.value().port, 443);
  auto v6 = ParseProxyRequest("CONNECT [::1]:443 HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6.value().host, "[::1]");  // the proxy refuses it as an IP literal
}

TEST(ProxyRequest, AbsoluteFormPlainHttp) {
  auto r =
      ParseProxyRequest("GET http://Example.org/a/b?c=d#frag HTTP/1.0\r\nAccept: */*\r\nContent-Length: 3\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().what;
  EXPECT_EQ(r.value().kind, RequestKind::kPlainHttp);
  EXPECT_EQ(r.value().host, "Example.org");
  EXPECT_EQ(r.value().port, 80);
  EXPECT_EQ(r.value().target_path, "/a/b?c=d");
  EXPECT_EQ(r.value().content_length, 3u);
  auto q = ParseProxyRequest("GET http://example.org:8080?x HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().port, 8080);
  EXPECT_EQ(q.value().target_path, "/?x");
}

TEST(ProxyRequest, MalformedAndSmugglingShapesAreRefusedWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"CONNECT example.org HTTP/1.1\r\n\r\n", "host:port"},
      {"CONNECT example.org:0 HTTP/1.1\r\n\r\n", "port"},
      {"CONNECT example.org:443 HTTP/1.1\r\n", "incomplete"},
      {"CONNECT example.org:443 HTTP/1.1\n\n", "incomplete"},
      {"CONNECT example.org:443 HTTP/1.1\r\nA: b\nC: d\r\n\r\n", "bare CR or LF"},
      {"CONNECT  example.org:443 HTTP/1.1\r\n\r\n", "METHOD TARGET"},
      {"CONNECT example.org:443 HTTP/3\r\n\r\n", "HTTP/1.0 or HTTP/1.1"},
      {"CONNECT user:pw@example.org:443 HTTP/1.1\r\n\r\n", "userinfo"},
      {"CONNECT example.org:443 HTTP/1.1\r\n folded: x\r\n\r\n", "folding"},
      {"CONNECT example.org:443 HTTP/1.1\r\nNo colon\r\n\r\n", "without ':'"},
      {"CONNECT example.org:443 HTTP/1.1\r\nX: a\x01\r\n\r\n", "control byte"},
      {"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n", "not a proxy request"},
      {"GET * HTTP/1.1\r\n\r\n", "not a proxy request"},
      {"GET https://example.org/ HTTP/1.1\r\n\r\n", "CONNECT"},
      {"GET ftp://example.org/ HTTP/1.1\r\n\r\n", "only http://"},
      {"GET http:///x HTTP/1.1\r\n\r\n", "empty host"},
      {"GET http://exa\x7fmple.org/ HTTP/1.1\r\n\r\n", "non-ASCII"},
      {"GET http://example.org/ HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\n", "more than one"},
      {"GET http://example.org/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length"},
      {"GET http://example.org/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "both"},
      {"G(T http://example.org/ HTTP/1.1\r\n\r\n", "method"},
      // A Connection header that would drop what frames or addresses the request.
      {"POST http://example.org/ HTTP/1.1\r\nConnection: Content-Length\r\nContent-Length: 47\r\n\r\n",
       "Connection names Content-Length"},
      {"POST http://example.org/ HTTP/1.1\r\nConnection: close,  content-length \r\nContent-Length: 4\r\n\r\n",
       "Connection names Content-Length"},
      {"GET http://example.org/ HTTP/1.1\r\nConnection: keep-alive\r\nConnection: Transfer-Encoding\r\n\r\n",
       "Connection names Transfer-Encoding"},
      {"GET http://example.org/ HTTP/1.1\r\nConnection: HOST\r\n\r\n", "Connection names Host"},
      {"CONNECT example.org:443 HTTP/1.1\r\nConnection: Host\r\n\r\n", "Connection names Host"},
  };
  for (const auto& [head, reason] : cases) {
    auto r = ParseProxyRequest(head);
    ASSERT_FALSE(r.ok()) << head;
    EXPECT_NE(r.error().what.find(reason), std::string::npos) << head << " -> " << r.error().what;
    EXPECT_EQ(r.error().what.find('\n'), std::string::npos);
  }
}

TEST(ProxyRequest, HeadEnd) {
  EXPECT_EQ(FindHeadEnd("CONNECT a:1 HTTP/1.1\r\n\r\nrest"), 24u);
  EXPECT_EQ(FindHeadEnd("CONNECT a:1 HTTP/1.1\r\n"), std::nullopt);
}

TEST(ProxyRequest, UpstreamHeadIsOriginFormWithoutProxyOrHopHeaders) {
  auto r = ParseProxyRequest(
      "POST http://example.org:8080/x HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic c2VjcmV0\r\n"
      "Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nUpgrade: websocket\r\nX-Keep: 2\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.error().what;
  EXPECT_EQ(
      UpstreamHead(r.value()),
      "POST /x HTTP/1.1\r\nHost: example.org:8080\r\nX-Keep: 2\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

// Whatever the bytes, the parser returns a request or a one-line reason.
RC_GTEST_PROP(ProxyRequest, NeverCrashesAndReasonsAreOneLine, ()) {
  const auto pieces = *rc::gen::container<std::vector<std::string>>(rc::gen::elementOf(std::vector<std::string>{
      "CONNECT",           "GET",       " ",     "\r\n",  "\n", "\r",       ":",    "http://",
      "https://",          "a.example", "[::1]", "443",   "/",  "HTTP/1.1", "Host", "Content-Length",
      "Transfer-Encoding", "@",         "0",     "99999", "\t", "\x01",     "\xff"}));
  std::string head;
  for (const auto& p : pieces) head += p;
  head += "\r\n\r\n";
  auto r = ParseProxyRequest(head);
  if (!r.ok()) {
    RC_ASSERT(!r.error().what.empty());
    RC_ASSERT(r.error().what.find('\n') == std::string::npos);
  } else {
    RC_ASSERT(!r.value().host.empty());
    RC_ASSERT(r.value().port >= 1);
  }
}

// What an HTTP/1.1 server makes of the bytes the proxy sends upstream for a
// plain request: the heads it reads, each with its Host and framing. Strict
// like a real origin (RFC 9112): Content-Length frames the body, nothing
// else does here (the proxy never forwards a Transfer-Encoding body).
struct OriginView {
  int requests = 0;
  std::vector<std::string> hosts;  // Host values of the first request
  bool framing_ok = true;          // every request had at most one Content-Length and no Transfer-Encoding
};

OriginView ParseAsOrigin(std::string_view bytes) {
  OriginView view;
  while (!bytes.empty()) {
    const auto end = bytes.find("\r\n\r\n");
    if (end == std::string_view::npos) {  // leftover bytes: a partial second request
      ++view.requests;
      break;
    }
    const std::string_view head = bytes.substr(0, end + 2);
    bytes.remove_prefix(end + 4);
    ++view.requests;
    uint64_t length = 0;
    int lengths = 0;
    size_t pos = head.find("\r\n") + 2;
    while (pos < head.size()) {
      const auto eol = head.find("\r\n", pos);
      const std::string_view line = head.substr(pos, eol - pos);
      pos = eol + 2;
      const auto colon = line.find(':');
      std::string name(line.substr(0, colon));
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (name == "content-length") {
        ++lengths;
        length = std::stoull(std::string(value));
      }
      if (name == "transfer-encoding") view.framing_ok = false;
      if (name == "host" && view.requests == 1) view.hosts.emplace_back(value);
    }
    if (lengths > 1) view.framing_ok = false;
    if (length > bytes.size()) {
      view.framing_ok = false;
      break;
    }
    bytes.remove_prefix(length);
  }
  return view;
}

// For any head the parser accepts and the proxy forwards (plain HTTP, no
// Transfer-Encoding), the head it sends plus the declared body it forwards
// parse upstream as exactly one request, whose Host is the checked target
// and whose Content-Length frames exactly the body that was checked. The
// body is itself a request head, as a smuggler would send it.
RC_GTEST_PROP(ProxyRequest, UpstreamBytesAreExactlyOneRequestForTheCheckedHost, ()) {
  const std::vector<std::string> names = {
      "Host",    "Connection", "Transfer-Encoding", "X-A", "Keep-Alive",          "Proxy-Connection", "TE",
      "Upgrade", "HOST",       "Trailer",           "X-B", "Proxy-Authorization", "Content-Length"};
  const std::vector<std::string> values = {"unlisted.test", "0", "close",   "keep-alive",  "x-a",
                                           "chunked",       "1", "upgrade", "te, trailer", "unlisted.test:80"};
  const std::vector<std::string> tokens = {
      "close", "keep-alive", "Content-Length", " content-length ", "Transfer-Encoding", "Host", "X-A",
      "x-b",   "TE",         "Upgrade"};
  std::vector<std::string> lines;
  const int extra = *rc::gen::inRange(0, 5);
  for (int i = 0; i < extra; ++i) lines.push_back(*rc::gen::elementOf(names) + ": " + *rc::gen::elementOf(values));
  // Usually a body, and usually a Connection header whose tokens may name
  // what frames or addresses the request, each at any place in the head.
  const int length = *rc::gen::elementOf(std::vector<int>{-1, 0, 1, 47, 100, 47});
  if (length >= 0)
    lines.insert(lines.begin() + *rc::gen::inRange<size_t>(0, lines.size() + 1),
                 "Content-Length: " + std::to_string(length));
  const auto named = *rc::gen::container<std::vector<std::string>>(*rc::gen::inRange(0, 4), rc::gen::elementOf(tokens));
  if (!named.empty()) {
    std::string value;
    for (const auto& t : named) value += (value.empty() ? "" : ",") + t;
    lines.insert(lines.begin() + *rc::gen::inRange<size_t>(0, lines.size() + 1), "Connection: " + value);
  }
  std::string head = *rc::gen::elementOf(std::vector<std::string>{"GET", "POST", "PUT"}) + " http://" +
                     *rc::gen::elementOf(std::vector<std::string>{"allowed.test", "Allowed.Test:8080", "a.b.test:80"}) +
                     *rc::gen::elementOf(std::vector<std::string>{"/", "/x?y", ""}) + " HTTP/1.1\r\n";
  for (const auto& line : lines) head += line + "\r\n";
  head += "\r\n";
  auto parsed = ParseProxyRequest(head);
  RC_PRE(parsed.ok());
  const ProxyRequest& req = parsed.value();
  RC_PRE(req.kind == RequestKind::kPlainHttp && !req.transfer_encoding);
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: unlisted.test\r\n\r\n";
  std::string body;
  while (body.size() < req.content_length.value_or(0)) body += smuggled;
  body.resize(req.content_length.value_or(0));
  // The proxy forwards the declared body and nothing after it.
  const OriginView view = ParseAsOrigin(UpstreamHead(req) + body);
  RC_ASSERT(view.requests == 1);
  RC_ASSERT(view.framing_ok);
  const std::string expected_host = req.host + (req.port == 80 ? "" : ":" + std::to_string(req.port));
  RC_ASSERT(view.hosts == std::vector<std::string>{expected_host});
}

TEST(ProxyRequest, TheSmugglingHeadOfTheIssueIsRefused) {
  const std::string head =
      "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: Content-Length\r\n"
      "Content-Length: 47\r\n\r\n";
  auto r = ParseProxyRequest(head);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("Connection names Content-Length"), std::string::npos) << r.error().what;
}

RC_GTEST_PROP(ProxyRequest, ConnectTargetsRoundTrip, ()) {
  const std::string host =
      *rc::gen::container<std::string>(*rc::gen::inRange(1, 30), rc::gen::elementOf(std::string("abz09.-")));
  const int port = *rc::gen::inRange(1, 65536);
  auto r = ParseProxyRequest("CONNECT " + host + ":" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  RC_ASSERT(r.ok());
  RC_ASSERT(r.value().host == host);
  RC_ASSERT(r.value().port == port);
}

}  // namespace
}  // namespace oarbank::egress
