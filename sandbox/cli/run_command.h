// `oarbank-agent run [OPTIONS] POLICY.json -- ARGV`: the supervised run
// (sandbox/supervise/supervisor.h): namespaces, the process container,
// verification at the gate, the timeout.
//
// Without --json the module's output streams to stdout and stderr as it
// comes (or goes only to --stdout-file / --stderr-file), a fault is one
// "sandbox: <fault>: <reason>" line, and the exit status is the module's
// (128+signal when killed), 64 for a bad option or policy (one line), 70
// when refused, 71 when exec failed. Once the job has run, its status is
// reported whatever its output holds: 70 always means nothing ran.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class RunCommand {
 public:
  explicit RunCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `run` was parsed, else nothing.
  std::optional<int> Run() const;

 private:
  struct Options;
  std::shared_ptr<Options> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
