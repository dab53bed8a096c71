// `oarbank-agent sandbox-report [POLICY.json]`: what this host enforces, as
// one JSON document on stdout (docs/json/report.md): the host's facts, the
// supervisor's and the container runtime's; with a policy, its plan, the
// grants an agent may make and the placement `run` makes. Exit status: 0,
// or 64 for a bad policy (one line).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class ReportCommand {
 public:
  explicit ReportCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `sandbox-report` was parsed, else nothing.
  std::optional<int> Run() const;

 private:
  struct Options;
  std::shared_ptr<Options> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
