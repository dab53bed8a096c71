// The egress proxy's request parser: what it accepts, what it refuses with
// which reason, and what a plain HTTP request becomes upstream.
#include "egress_request.h"

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
  auto r = ParseProxyRequest("GET http://Example.org/a/b?c=d#frag HTTP/1.0\r\nAccept: */*\r\nContent-Length: 3\r\n\r\n");
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
  EXPECT_EQ(UpstreamHead(r.value()),
            "POST /x HTTP/1.1\r\nHost: example.org:8080\r\nX-Keep: 2\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

// Whatever the bytes, the parser returns a request or a one-line reason.
RC_GTEST_PROP(ProxyRequest, NeverCrashesAndReasonsAreOneLine, ()) {
  const auto pieces = *rc::gen::container<std::vector<std::string>>(rc::gen::elementOf(std::vector<std::string>{
      "CONNECT", "GET", " ", "\r\n", "\n", "\r", ":", "http://", "https://", "a.example", "[::1]", "443", "/",
      "HTTP/1.1", "Host", "Content-Length", "Transfer-Encoding", "@", "0", "99999", "\t", "\x01", "\xff"}));
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
