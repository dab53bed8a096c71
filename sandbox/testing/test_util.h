// Shared by the tests beside the code: a throw-away directory tree laid out
// like a job (bundle, runtime, work, work/tmp, data, data/tmp, a secret
// outside every grant), policies written into it, and injected host facts.
#pragma once

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "sandbox/host/host_facts.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank::testing {

// Tests of the cage itself run their jobs unproven (RunOptions::unproven):
// the proof gate has tests of its own (supervisor_test.cc, ProofGate).
inline cage::RunOptions UnprovenOptions() {
  cage::RunOptions o;
  o.unproven = true;
  return o;
}

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/oarbank-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    chmod(root_.c_str(), 0755);
    for (const char* d : {"bundle", "runtime", "work", "work/tmp", "data", "data/tmp", "outside"}) {
      std::filesystem::create_directories(root_ + "/" + d);
      chmod((root_ + "/" + d).c_str(), 0777);
    }
    chmod((root_ + "/bundle").c_str(), 0755);
    chmod((root_ + "/runtime").c_str(), 0755);
    Write("bundle/file", "bundle contents\n", 0644);
    Write("outside/secret", "ssh private key\n", 0644);
    Write("work/file", "work contents\n", 0666);
  }
  ~TempTree() { std::filesystem::remove_all(root_); }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }
  const std::string& root() const { return root_; }

  void Write(const std::string& rel, const std::string& text, mode_t mode) const {
    std::ofstream(Path(rel)) << text;
    chmod(Path(rel).c_str(), mode);
  }

  // A listening unix socket (the broker endpoint in broker policies).
  std::string MakeSocket(const std::string& rel) const {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", Path(rel).c_str());
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd, 1);
    return Path(rel);
  }

  // A runner policy over this tree; `extra` is spliced into the JSON object.
  std::string RunnerJson(const std::string& extra = "") const {
    return R"({"contract": 1, "role": "runner", "bundle": ")" + Path("bundle") + R"(", "runtime": ")" +
           Path("runtime") + R"(", "work": ")" + Path("work") + R"(", "data": ")" + Path("data") + R"(", "tmp": ")" +
           Path("work/tmp") + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
  }

  Policy Runner(const std::string& extra = "") const {
    auto p = ParsePolicy(RunnerJson(extra));
    if (!p.ok()) {
      fprintf(stderr, "test policy refused: %s\n", PolicyErrorLine(p.error()).c_str());
      abort();
    }
    return p.value();
  }

 private:
  std::string root_;
};

// A host with everything a full cage needs, at the given Landlock ABI.
inline HostFacts FakeHost(int abi) {
  HostFacts h;
  h.kernel_release = "test";
  h.arch = "x86_64";
  h.landlock_abi = abi;
  h.landlock_kernel_abi = abi;
  h.seccomp_filter = true;
  h.seccomp_actions = {"kill_process", "kill_thread", "trap", "errno", "user_notif", "trace", "log", "allow"};
  h.user_namespaces = true;
  h.user_namespaces_detail = "available";
  h.uid = h.gid = 1000;
  return h;
}

// Polls `done` until it holds or `limit` passes: a test waits for what it
// needs, never for a fixed time.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

}  // namespace oarbank::testing
