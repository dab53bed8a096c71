// `oarbank-agent cage`: the cage's Spec (oarbank/cage.h) on the command
// line, for a coding agent and the commands it runs on a worktree:
//
//   cage --worktree DIR [--writable] [--state DIR]... [--scratch DIR]
//        [--read DIR]... [--read-file FILE]... [--read-only PATH]...
//        [--exec-writable | --no-exec-writable] [--allow HOST[:PORT]]...
//        [--env NAME[=VALUE]]... [--abi-floor N] [--timeout S] [--json]
//        [--unproven] -- ARGV
//
// It is cage::Run(Spec) under the supervisor, as `run` is RunPolicy: the
// same namespaces, gate and proof check. Nothing of the caller's
// environment passes but what --env names. Exit status: the job's (128 +
// signal when killed), 64 for bad options or paths (one line), 70 when the
// cage is refused (nothing ran; the line names the part), 71 when exec
// failed in the cage.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class CageCommand {
 public:
  explicit CageCommand(CLI::App& app);
  // Whether `name` is this command.
  static bool Names(const std::string& name);
  // The exit status when `cage` was parsed, else nothing.
  std::optional<int> Run() const;

 private:
  struct Options;
  std::shared_ptr<Options> o_;
  CLI::App* sub_ = nullptr;
};

}  // namespace oarbank
