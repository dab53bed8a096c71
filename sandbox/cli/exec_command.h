// `oarbank-agent sandbox-exec [--gate-fd FD] [--env NAME=VALUE]... POLICY.json
// -- ARGV`: the launcher. It confines this process and execs ARGV; its flow
// reads top to bottom:
//   policy -> host facts -> plan (placement) -> confine -> [gate] -> exec.
// The module's environment is built as `run` builds it (nothing of the
// caller's). Exit status: the module's once it runs; 64 for a bad policy or
// option (one line), 70 when a part cannot be enforced (nothing ran; the
// line names it), 71 when exec failed.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class ExecCommand {
 public:
  explicit ExecCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `sandbox-exec` was parsed (or exec failed), else
  // nothing; once the module runs, this never returns.
  std::optional<int> Run() const;

 private:
  struct Options;
  std::shared_ptr<Options> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
