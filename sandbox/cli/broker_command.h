// `oarbank-agent broker --socket PATH --work DIR --job ID [OPTIONS] [--
// JOB-ARGV]`: serves one job's container broker socket
// (sandbox/broker/server.h), then runs JOB-ARGV if given and stops when it
// exits. Exit status: the job command's, else 0; 64 for bad arguments (one
// line), 70 when the socket cannot be set up.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class BrokerCommand {
 public:
  explicit BrokerCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `broker` was parsed, else nothing.
  std::optional<int> Run() const;

 private:
  struct Options;
  std::shared_ptr<Options> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
