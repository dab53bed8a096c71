// oarbank-conform: runs the escape battery on this host and writes the
// reports. Exit 0 only when every probe escapes unconfined and every
// confined run matches the expectations table.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <CLI/CLI.hpp>

#include "harness/battery.h"
#include "harness/catalogue.h"
#include "harness/module_conform.h"
#include "harness/mutants.h"
#include "harness/reports.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/common/sha256.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/supervise/job_network.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

// Where the battery's files are. Installed (GNUInstallDirs): the agent beside
// oarbank-conform in bin/, the probes in libexec/oarbank/probes/, the
// expectations and the battery policies in share/oarbank/, all found
// relative to this binary (install_paths.h). Otherwise the build tree:
// build/harness/oarbank-conform with build/sandbox/oarbank-agent,
// build/probes/, and the tables and policies in the source tree.
struct Layout {
  bool installed = false;
  std::string agent, probes, policies, expectations, catalogue, mutation;
};

Layout FindLayout(const fs::path& self) {
  const fs::path data = (self / OARBANK_BIN_TO_DATA).lexically_normal();
  std::error_code ec;
  if (fs::is_regular_file(data / "expectations.tsv", ec) && fs::is_regular_file(self / "oarbank-agent", ec))
    return {true,
            (self / "oarbank-agent").string(),
            (self / OARBANK_BIN_TO_PROBES).lexically_normal().string(),
            (data / "policies" / "battery").string(),
            (data / "expectations.tsv").string(),
            (data / "catalogue.tsv").string(),
            (data / "mutation.json").string()};
  return {false,
          (self.parent_path() / "sandbox" / "oarbank-agent").string(),
          (self.parent_path() / "probes").string(),
          std::string(OARBANK_SOURCE_DIR) + "/fixtures/policies/battery",
          std::string(OARBANK_SOURCE_DIR) + "/escapes/expectations.tsv",
          std::string(OARBANK_SOURCE_DIR) + "/escapes/catalogue.tsv",
          std::string(OARBANK_SOURCE_DIR) + "/escapes/mutation.json"};
}

// Where `f` (a path in the source tree, as the build hashed it) lies in
// `layout`, or "" when that layout does not carry it.
std::string BatteryFilePath(const Layout& layout, const BatteryFile& f) {
  const std::string path = f.path;
  if (!layout.installed) return std::string(OARBANK_SOURCE_DIR) + "/" + path;
  if (path == "escapes/expectations.tsv") return layout.expectations;
  const std::string policies = "fixtures/policies/battery/";
  if (path.rfind(policies, 0) == 0) return layout.policies + "/" + path.substr(policies.size());
  // The probes' sources are not installed, only the probes the package built
  // from them: an installed battery checks the expectations and policies it
  // runs, and its probes are as much the package's as oarbank-agent is.
  return "";
}

// "" for a complete run of the battery this build ships, else what makes it
// partial. The battery's files must be the ones this build hashed, and its
// policy directory may hold no policy the build did not hash.
std::string PartialRun(const CLI::App& app, const BatteryOptions& o, const std::vector<int>& uids,
                       const Layout& layout) {
  for (const char* option : {"--probes", "--policies", "--expectations", "--probe", "--policy", "--landlock-abi-max",
                             "--catalogue", "--single-entry", "--agent-env"})
    if (app.get_option(option)->count() > 0) return std::string("a partial run (") + option + ") proves nothing";
  if (o.abi_cap >= 0) return "a run with a capped Landlock ABI proves nothing";
  if (std::vector<int>(uids) != std::vector<int>{0, 65534}) return "the battery runs as uids 0 and 65534 (--uids)";
  std::set<std::string> hashed;
  for (const BatteryFile& f : BatteryFiles()) {
    const std::string path = BatteryFilePath(layout, f);
    if (path.empty()) continue;
    hashed.insert(fs::path(path).lexically_normal().string());
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid() || Sha256HexOfFd(fd.get()).value_or("") != f.sha256)
      return path + " changed since this build: rebuild, then run the battery";
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o.policy_dir, ec))
    if (entry.path().extension() == ".json" && !hashed.count(entry.path().lexically_normal().string()))
      return entry.path().string() + " is not a policy this build hashed: rebuild, then run the battery";
  if (ec) return o.policy_dir + ": " + ec.message();
  return "";
}

// The command line: the battery's options, and `module`'s and `mutants`'.
struct ConformArgs {
  BatteryOptions battery;
  ModuleConformOptions module;
  MutantOptions mutants;
  std::string out = "conform-report";
  std::string attest = AttestationPath();
  std::vector<int> uids = {0, 65534};
  bool catalogue_only = false;
  bool single_entry = false;
};

CLI::App* AddModuleCommand(CLI::App& app, ModuleConformOptions& mo) {
  // oarbank-conform module MANIFEST -- SUITE: a module's runner suite under
  // its declared grants, with its denials explained (module_conform.h).
  auto* module =
      app.add_subcommand("module", "Run a module's runner suite under its manifest's grants; explain denials");
  module->add_option("manifest", mo.manifest, "The module's manifest (TOML)")->required()->check(CLI::ExistingFile);
  module->add_option("argv", mo.argv, "The runner suite (after --)")->required();
  module->add_option("--bundle", mo.bundle, "The module's bundle (default: the manifest's directory)");
  module->add_option("--registry", mo.registry, "The operator's tool registry (TOML)")->check(CLI::ExistingFile);
  module->add_option("--uid", mo.uid, "Run the suite as this uid (root only)")->check(CLI::Range(0, 1 << 30));
  module->add_option("--out", mo.out, "Directory for module.json");
  module->add_option("--timeout", mo.timeout_s, "Kill the suite after S seconds")->check(CLI::Range(1.0, 86400.0));
  module->add_flag("--keep", mo.keep, "Keep the job tree");
  return module;
}

void AddBatteryOptions(CLI::App& app, ConformArgs& a) {
  BatteryOptions& o = a.battery;
  app.set_version_flag(
      "--version", [&o] { return VersionText("oarbank-conform", o.agent); },
      "Print the version, the SHA-256 of the oarbank-agent it drives and of the battery");
  app.add_option("--agent", o.agent, "oarbank-agent to test")->check(CLI::ExistingFile);
  app.add_option("--probes", o.probe_dir, "Directory of built probes")->check(CLI::ExistingDirectory);
  app.add_option("--policies", o.policy_dir, "Directory of battery policy fixtures")->check(CLI::ExistingDirectory);
  app.add_option("--expectations", o.expectations, "expectations.tsv")->check(CLI::ExistingFile);
  app.add_option("--out", a.out, "Directory for battery.json, battery.xml, battery.md, battery.html");
  app.add_option("--landlock-abi-max", o.abi_cap, "Run the launcher at most at this Landlock ABI (can only lower)");
  o.jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  app.add_option("--jobs", o.jobs, "Probes run at once (default: the number of CPUs)")->check(CLI::Range(1, 64));
  app.add_option("--uids", a.uids, "Identities the confined side runs as")->delimiter(',');
  app.add_option("--attest", a.attest,
                 "Where a complete, uncapped run records the policy classes it proved (cage-before-capability)");
  app.add_option("--probe", o.only_probes, "Only these probes")->delimiter(',');
  app.add_option("--policy", o.only_policies, "Only these policies")->delimiter(',');
  app.add_flag("--single-entry", a.single_entry,
               "Run the bare launcher's cells under sandbox-exec only, not under the supervisor (run) too");
  app.add_option("--catalogue-table", o.catalogue, "catalogue.tsv: the published escapes the report's table lists")
      ->check(CLI::ExistingFile);
  app.add_option("--agent-env", o.agent_env,
                 "NAME=VALUE added to the agent's environment: a test-only agent's fault (writes no attestation)");
  app.add_flag("--catalogue", a.catalogue_only,
               "Run only the probes the catalogue names and print its table: technique, source, verdicts");
}

CLI::App* AddMutantsCommand(CLI::App& app, MutantOptions& mo) {
  CLI::App* mutants = app.add_subcommand(
      "mutants", "Remove each enforcement point of the test-only agent alone and run the battery against it");
  mutants->add_option("--point", mo.only_points, "Only these points (ids of mutation.json)")->delimiter(',');
  mutants
      ->add_option("--killers", mo.killers,
                   "An earlier mutation.json: its killers run first, its survivors are not rerun")
      ->check(CLI::ExistingFile);
  mutants
      ->add_option("--covers", mo.covers,
                   "What covers a point the battery cannot see alone (default: escapes/mutation-cover.tsv)")
      ->check(CLI::ExistingFile);
  return mutants;
}

// `mutants`: the mutation report, mutation.{json,md,html} in --out; exit 1
// when a point survives that the --killers report did not list as a survivor.
int RunMutantsCommand(ConformArgs& a, const BatteryOptions& o) {
  if (access(o.agent.c_str(), X_OK) != 0) {
    std::cerr << "oarbank-conform: mutants: " << o.agent << ": not there (the test-only build, oarbank-agent-faulty)\n";
    return kExitUsage;
  }
  a.mutants.battery = o;
  a.mutants.battery.both_entries = true;  // a point may protect one entry point alone
  auto report = RunMutants(a.mutants);
  if (!report.ok()) {
    std::cerr << "oarbank-conform: " << report.error().where << ": " << report.error().what << "\n";
    return kExitUsage;
  }
  bool written = true;
  for (const auto& [name, text] :
       std::vector<std::pair<std::string, std::string>>{{"mutation.json", MutationJson(report.value()).dump(2) + "\n"},
                                                        {"mutation.md", MutationMarkdown(report.value())},
                                                        {"mutation.html", MutationHtml(report.value())}})
    if (auto why = WriteReportFile(a.out + "/" + name, text); !why.empty()) {
      std::cerr << "oarbank-conform: cannot write " << why << "\n";
      written = false;
    }
  std::cout << MutationSummary(report.value());
  if (!written) return 1;
  std::cout << "reports: " << a.out << "/mutation.{json,md,html}\n";
  return report.value().new_survivors == 0 ? 0 : 1;
}

// Every report, or false after a line for each that did not land: nobody
// may sign off a report they cannot read.
bool WriteReports(const std::string& out, const BatteryResult& result) {
  const std::vector<std::pair<std::string, std::string>> reports = {
      {"battery.json", BatteryJson(result).dump(2) + "\n"},
      {"battery.xml", BatteryJunit(result)},
      {"battery.md", BatteryMarkdown(result)},
      {"battery.html", BatteryHtml(result)},
  };
  bool written = true;
  for (const auto& [name, text] : reports) {
    if (auto why = WriteReportFile(out + "/" + name, text); !why.empty()) {
      std::cerr << "oarbank-conform: cannot write " << why << "\n";
      written = false;
    }
  }
  return written;
}

// The attestation of a complete run: a class is proven when every cell of
// its policies passed (ProvenClasses). False after one line.
bool Attest(const std::string& path, const BatteryResult& result, const std::string& agent) {
  Attestation a;
  // The job network the agent's egress-any jobs ran (job_network.h).
  HostFacts host = result.host;
  NameJobNetworkParts(host.job_network, agent);
  a.binding = BindingFor(host, agent);
  a.proven_classes = ProvenClasses(result);
  if (a.binding.launcher_sha256.empty()) {
    std::cerr << "oarbank-conform: cannot read " << agent << " to hash it: no attestation written\n";
    return false;
  }
  if (auto why = WriteAttestation(path, a); !why.empty()) {
    std::cerr << "oarbank-conform: cannot write the attestation " << path << ": " << why << "\n";
    return false;
  }
  std::cout << "attestation: " << path << " (" << a.proven_classes.size() << " policy classes proven)\n";
  return true;
}

int ConformMain(int argc, char** argv) {
  const Layout layout = FindLayout(fs::canonical("/proc/self/exe").parent_path());
  ConformArgs a;
  BatteryOptions& o = a.battery;
  o.agent = layout.agent;
  o.probe_dir = layout.probes;
  o.policy_dir = layout.policies;
  o.expectations = layout.expectations;
  o.catalogue = layout.catalogue;
  o.mutation = layout.mutation;
  a.module.agent = o.agent;
  // The test-only agent the analysis needs is never installed: its table
  // is the source tree's.
  if (!layout.installed) a.mutants.covers = std::string(OARBANK_SOURCE_DIR) + "/escapes/mutation-cover.tsv";
  CLI::App app{"oarbank-conform: the escape battery on this host"};
  AddBatteryOptions(app, a);
  CLI::App* module = AddModuleCommand(app, a.module);
  CLI::App* mutants = AddMutantsCommand(app, a.mutants);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "usage: " << e.what() << "\n";
    return kExitUsage;
  }
  if (module->parsed()) {
    if (app.get_option("--agent")->count() > 0) a.module.agent = o.agent;
    return RunModuleConform(a.module);
  }
  o.uids.assign(a.uids.begin(), a.uids.end());
  o.both_entries = !a.single_entry;
  if (auto why = PrepareReportDir(a.out); !why.empty()) {
    std::cerr << "oarbank-conform: --out " << why << "\n";
    return kExitUsage;
  }
  if (mutants->parsed()) {
    if (app.get_option("--agent")->count() == 0)
      o.agent = fs::path(layout.agent).parent_path() / "oarbank-agent-faulty";
    return RunMutantsCommand(a, o);
  }
  // --catalogue: the probes the catalogue names, and its table on the
  // terminal instead of the summary.
  if (a.catalogue_only) {
    auto entries = LoadCatalogue(o.catalogue);
    if (!entries.ok()) {
      std::cerr << "oarbank-conform: " << entries.error().where << ": " << entries.error().what << "\n";
      return kExitUsage;
    }
    if (o.only_probes.empty()) o.only_probes = CatalogueProbes(entries.value());
  }
  auto result = RunBattery(o);
  if (!result.ok()) {
    std::cerr << "oarbank-conform: " << result.error().where << ": " << result.error().what << "\n";
    return kExitUsage;
  }
  const bool written = WriteReports(a.out, result.value());
  std::cout << (a.catalogue_only ? CatalogueText(result.value()) : BatterySummary(result.value()));
  if (!written) return 1;
  std::cout << "reports: " << a.out << "/battery.{json,xml,md,html}\n";
  // Only a complete run of the shipped battery, on the kernel as it is,
  // proves anything; any other run says why it wrote no attestation.
  if (const std::string partial = PartialRun(app, o, a.uids, layout); !partial.empty())
    std::cout << "attestation: not written: " << partial << "\n";
  else if (!Attest(a.attest, result.value(), o.agent))
    return 1;
  return result.value().passed ? 0 : 1;
}

}  // namespace
}  // namespace oarbank

// An exception nothing expected ends the run with one line and exit 70
// (EX_SOFTWARE), never with abort().
int main(int argc, char** argv) {
  try {
    return oarbank::ConformMain(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "oarbank-conform: internal error: " << e.what() << "\n";
    return oarbank::kExitNotEnforced;
  }
}
