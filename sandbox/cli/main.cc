// oarbank-agent: the launcher (sandbox-exec, sandbox/cli/exec_command.h),
// the enforcement report (sandbox-report, report_command.h), the supervised
// run (run, run_command.h), the coding-agent cage (cage, cage_command.h),
// the egress proxy (egress-proxy, egress_proxy_command.h), the container
// broker (broker, broker_command.h) and the manifest commands
// (manifest_commands.h). Each registers its options on the command line;
// main parses it and runs the one parsed.
#include <cstdio>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "sandbox/cli/broker_command.h"
#include "sandbox/cli/cage_command.h"
#include "sandbox/cli/egress_proxy_command.h"
#include "sandbox/cli/exec_command.h"
#include "sandbox/cli/manifest_commands.h"
#include "sandbox/cli/report_command.h"
#include "sandbox/cli/run_command.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/plan/attestation.h"
#ifdef OARBANK_FAULT_INJECTION
#include "sandbox/cli/fault_injection.h"
#include "sandbox/cli/mutation_points.h"
#endif

namespace oarbank {
namespace {

int AgentMain(int argc, char** argv) {
  CLI::App app{"oarbank-agent: run untrusted module code in a kernel-enforced cage"};
  app.set_version_flag(
      "--version", [] { return VersionText("oarbank-agent", "/proc/self/exe"); },
      "Print the version and the launcher's SHA-256 (what a battery attestation binds)");
  app.require_subcommand(1);
  // Only the subcommand named first is registered: a launch pays for every
  // page of CLI11 state and code it touches (half a millisecond for the other
  // seven here). Help, a typo or no subcommand registers them all, so the
  // usage lists every one.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = ExecCommand::Names(first) || ReportCommand::Names(first) || RunCommand::Names(first) ||
                     CageCommand::Names(first) || EgressProxyCommand::Names(first) || BrokerCommand::Names(first) ||
                     ManifestCommands::Names(first);
  auto wants = [&](bool (*names)(const std::string&)) { return !known || names(first); };
  // Registered in the order the usage lists them.
  std::optional<ExecCommand> exec;
  if (wants(ExecCommand::Names)) exec.emplace(app);
  std::optional<ReportCommand> report;
  if (wants(ReportCommand::Names)) report.emplace(app);
  std::optional<RunCommand> run;
  if (wants(RunCommand::Names)) run.emplace(app);
  std::optional<EgressProxyCommand> proxy;
  if (wants(EgressProxyCommand::Names)) proxy.emplace(app);
  std::optional<BrokerCommand> broker;
  if (wants(BrokerCommand::Names)) broker.emplace(app);
  std::optional<CageCommand> cage;
  if (wants(CageCommand::Names)) cage.emplace(app);
  std::optional<ManifestCommands> manifest;  // manifest-check, approve, manifest-policy
  if (wants(ManifestCommands::Names)) manifest.emplace(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!known && !first.empty() && first[0] != '-') {
      std::string names;
      for (const auto* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      fprintf(stderr, "usage: unknown command %s (one of: %s)\n", first.c_str(), names.c_str());
    } else {
      // CLI11 prefixes an option callback's error with a name it does not
      // always have (": --option: why"): one line, without the empty part.
      std::string what = e.what();
      if (what.rfind(": ", 0) == 0) what.erase(0, 2);
      fprintf(stderr, "usage: %s\n", what.c_str());
    }
    return kExitUsage;
  }
  // Exactly one was parsed (require_subcommand(1)): its exit status.
  std::optional<int> status;
  if (exec && !status) status = exec->Run();
  if (run && !status) status = run->Run();
  if (cage && !status) status = cage->Run();
  if (report && !status) status = report->Run();
  if (proxy && !status) status = proxy->Run();
  if (broker && !status) status = broker->Run();
  if (manifest && !status) status = manifest->Run();
  return status.value_or(kExitUsage);
}

}  // namespace
}  // namespace oarbank

// An exception nothing expected ends the command with one line and exit 70
// (EX_SOFTWARE), never with abort(): before exec that means no module ran.
int main(int argc, char** argv) {
  try {
#ifdef OARBANK_FAULT_INJECTION
    oarbank::InstallFaultHooks();
    if (argc == 3 && std::string(argv[1]) == "mutation-points") return oarbank::MutationPointsMain(argc, argv);
#endif
    return oarbank::AgentMain(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "oarbank-agent: internal error: %s\n", e.what());
    return oarbank::kExitNotEnforced;
  }
}
