// The agent's manifest commands, registered on oarbank-agent's command line:
//
//   manifest-check MANIFEST            canonical requests, digest, whether an
//                                      approval is needed, the flags an
//                                      operator sees, the portability lint
//   approve MANIFEST --by NAME         record an operator's approval of the
//                                      exact requests (by digest)
//   manifest-policy MANIFEST --role R --bundle DIR [--work ...] ...
//                                      the Policy JSON for a job; refuses an
//                                      unapproved manifest (exit 77)
//
// Errors are one line naming the key or field; exit 64 for a bad manifest,
// registry, store or job, 77 for a manifest that is not approved.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace oarbank {

class ManifestCommands {
 public:
  explicit ManifestCommands(CLI::App& app);
  // Whether `name` is one of these commands.
  static bool Names(const std::string& name);
  // The exit status when one of these commands was parsed, else nothing.
  std::optional<int> Run() const;
  struct Options;  // the parsed options (manifest_commands.cc)

 private:
  std::shared_ptr<Options> o_;
};

}  // namespace oarbank
