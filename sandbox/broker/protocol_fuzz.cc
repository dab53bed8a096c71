// libFuzzer target for the broker's request parser (sandbox/broker/protocol.h): any
// line is a typed request or a refusal naming its culprit, never a crash.
// A refusal with an empty detail, an accepted run whose mount escapes the
// work/data directory or whose limits exceed the reservation, or an answer
// line that is not one line of JSON is a finding.
//
// Built as `broker_protocol_fuzz` with -DOARBANK_FUZZ=ON (clang); run it
// through scripts/fuzz-broker.sh, which lays out the directories it reads
// (OARBANK_FUZZ_BROKER_ROOT: work/, data/, and a symlink work/escape -> /).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sandbox/broker/protocol.h"

namespace {

oarbank::broker::BrokerConfig MakeConfig() {
  const char* root = getenv("OARBANK_FUZZ_BROKER_ROOT");
  if (root == nullptr) abort();
  oarbank::broker::BrokerConfig c;
  c.work_dir = std::string(root) + "/work";
  c.data_dir = std::string(root) + "/data";
  c.images = {{"localhost/fuzz@sha256:" + std::string(64, 'a'), oarbank::broker::HostPlatform()},
              {"localhost/other@sha256:" + std::string(64, 'b'), "linux/s390x"}};
  c.cpus = 2;
  c.mem_gb = 1;
  c.max_timeout_s = 600;
  c.host_platform = oarbank::broker::HostPlatform();
  return c;
}

bool Inside(const std::string& path, const std::string& dir) { return path == dir || path.rfind(dir + "/", 0) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const oarbank::broker::BrokerConfig config = MakeConfig();
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  auto parsed = oarbank::broker::ParseRequest(line, config);
  if (auto* refused = std::get_if<oarbank::broker::Refused>(&parsed)) {
    if (refused->detail.empty()) abort();
    const std::string answer = oarbank::broker::AnswerLine(oarbank::broker::RefusalJson(*refused));
    if (answer.find('\n') != answer.size() - 1) abort();
    return 0;
  }
  const auto& request = std::get<oarbank::broker::Request>(parsed);
  if (const auto* run = std::get_if<oarbank::broker::RunRequest>(&request)) {
    if (run->cpus > config.cpus || run->mem_gb > config.mem_gb || run->timeout_s > config.max_timeout_s) abort();
    if (run->network) abort();  // no egress grant in this config
    for (const auto& m : run->mounts) {
      if (!Inside(m.source, config.work_dir) && !Inside(m.source, config.data_dir)) abort();
      if (m.source.find("/escape") != std::string::npos) abort();  // the symlink to /
      if (m.destination.empty() || m.destination[0] != '/' || m.destination == "/") abort();
    }
  }
  return 0;
}
