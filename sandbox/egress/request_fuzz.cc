// libFuzzer target for the egress proxy's request parser and host checks
// (sandbox/egress/request.h, sandbox/egress/allowlist.h): bytes a confined module sends the
// proxy. Any input is a request or a one-line reason; a crash, a sanitizer
// report, a hang, or an accepted request whose host the proxy would match
// as an IP literal is a finding.
//
// Built as `egress_request_fuzz` with -DOARBANK_FUZZ=ON (clang); run it
// through scripts/fuzz-egress.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sandbox/egress/allowlist.h"
#include "sandbox/egress/request.h"

using namespace oarbank::egress;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The proxy parses only up to the end of the head.
  const auto end = FindHeadEnd(bytes);
  const std::string_view head = end ? bytes.substr(0, *end) : bytes;
  const auto parsed = ParseProxyRequest(head);
  if (!parsed.ok()) {
    if (parsed.error().what.empty() || parsed.error().what.find('\n') != std::string::npos) abort();
  } else {
    ProxyRequest req = parsed.value();
    if (req.host.empty() || req.port == 0) abort();
    if (req.kind == RequestKind::kPlainHttp && (req.target_path.empty() || req.target_path[0] != '/')) abort();
    if (req.content_length && req.transfer_encoding) abort();
    const auto host = NormalizeRequestHost(req.host);
    if (host.ok()) {
      // What the proxy matches and resolves is never an address.
      if (ParseIpAddress(host.value()) || host.value().find_first_of(":[]*/ ") != std::string::npos) abort();
      req.host = host.value();
      const std::string upstream = UpstreamHead(req);
      if (upstream.find("\r\n\r\n") != upstream.size() - 4) abort();  // one head, nothing smuggled after it
    }
  }
  // The same bytes as an allow entry and as a CIDR: a value or a reason.
  const auto entry = ParseAllowEntry(bytes.substr(0, 300));
  if (entry.ok() && (entry.value().host.empty() || ParseIpAddress(entry.value().host))) abort();
  const auto cidr = ParseCidr(bytes.substr(0, 64));
  if (cidr.ok() && !InCidr(cidr.value().base, cidr.value())) abort();
  return 0;
}
