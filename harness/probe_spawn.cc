#include "harness/probe_spawn.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "sandbox/common/subprocess.h"

namespace oarbank {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "SIG" + std::to_string(sig);
}

ProbeRun SpawnProbe(const std::vector<std::string>& argv, const std::vector<std::string>& env, uid_t uid,
                    int timeout_ms) {
  SubprocessSpec spec;
  spec.argv = argv;
  spec.env = env;
  if (uid != 0) spec.uid = uid;
  spec.new_process_group = true;  // nothing of the run stays behind in its group
  spec.inherit_fds = true;        // the world's inherited descriptors (world.h)
  CaptureLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const CapturedRun c = RunCaptured(spec, limits);
  ProbeRun run;
  if (!c.started) {
    run.detail = c.error;
    return run;
  }
  run.timed_out = c.timed_out;
  run.ms = c.ms;
  if (WIFSIGNALED(c.wait_status))
    run.signal = WTERMSIG(c.wait_status);
  else
    run.exit_code = WEXITSTATUS(c.wait_status);
  run.stderr_text = c.err.substr(0, 2000);
  run.stdout_text = c.out;
  const std::string& o = c.out;
  // The verdict: the last line of stdout that parses as one.
  size_t pos = 0;
  while (pos < o.size()) {
    size_t end = o.find('\n', pos);
    if (end == std::string::npos) end = o.size();
    const auto j = nlohmann::json::parse(o.substr(pos, end - pos), nullptr, false);
    if (j.is_object() && j.contains("verdict") && j["verdict"].is_string()) {
      run.verdict = j["verdict"];
      run.err = j.value("errno", "");
      run.detail = j.value("detail", "");
    }
    pos = end + 1;
  }
  return run;
}

}  // namespace oarbank
