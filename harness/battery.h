// The battery: every probe, first unconfined as root (it must escape, or it
// is BROKEN: it could not see an escape if there were one), then confined
// under each battery policy as each identity, compared with the
// expectations table and with what the world saw from outside.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/catalogue.h"
#include "harness/expectations.h"
#include "harness/world.h"
#include "sandbox/host/host_facts.h"

namespace oarbank {

enum class Outcome {
  kPass,         // matched the table (blocked, killed, allowed or refused as expected)
  kGap,          // a declared known gap, shown amber
  kUnsupported,  // the route does not exist on this kernel (said unconfined)
  kBroken,       // the probe did not escape unconfined
  kEscaped,      // it got through where the table says blocked (or the world saw an effect)
  kUnexpected,   // any other mismatch (wrong errno, refused when it should run, no verdict, ...)
};
const char* OutcomeName(Outcome outcome);
bool IsFailure(Outcome outcome);

struct ProbeRun {
  int exit_code = -1;  // -1 when killed
  int signal = 0;
  bool timed_out = false;
  std::string verdict;  // escaped / blocked / error / unsupported / "" (no line)
  std::string err;      // errno name from the verdict line
  std::string detail;
  std::string stderr_text;
  std::string stdout_text;  // its first 1 MiB
  double ms = 0;
  std::string Summary() const;  // "blocked EACCES", "killed SIGSYS", "refused (exit 70)", ...
};

struct Cell {
  std::string probe;
  std::string policy;
  uid_t uid = 0;
  std::string expected;
  ProbeRun run;
  Outcome outcome = Outcome::kPass;
  std::string why;    // the table's why, or what went wrong
  std::string entry;  // confined: "sandbox-exec", "run" or "cage"; "" unconfined
};

struct BatteryOptions {
  std::string agent;         // oarbank-agent
  std::string probe_dir;     // built probes
  std::string policy_dir;    // fixtures/policies/battery
  std::string expectations;  // escapes/expectations.tsv
  std::string catalogue;     // escapes/catalogue.tsv; "" for none (the report then has no catalogue table)
  std::string mutation;      // the checked-in mutation report (escapes/mutation.json) whose score the report shows
  int abi_cap = -1;          // --landlock-abi-max for the launcher
  int jobs = 2;              // probes run at once (each probe's runs stay in order)
  std::vector<uid_t> uids = {0, 65534};
  std::vector<std::string> only_probes;
  std::vector<std::string> only_policies;
  // Every cell the bare launcher can run (not a job_* probe, a contained
  // row, an egress-any policy or a cage run) also under the supervisor, as
  // a cell of its own judged by the table's rows for entry "run": the rules
  // that protect sandbox-exec alone are proven there, and run's there.
  // False (--single-entry) runs such cells under sandbox-exec alone.
  bool both_entries = true;
  // NAME=VALUE added to the agent's environment: the variable of a
  // test-only build's fault (a mutant, harness/mutants.h).
  std::vector<std::string> agent_env;
};

struct BatteryResult {
  HostFacts host;
  int abi = 0;  // what the launcher used (capped or not)
  std::vector<std::string> probes, policies;
  std::vector<std::string> policy_classes;  // PolicyClass of each policy, same order
  std::vector<uid_t> uids;
  std::vector<Cell> unconfined;  // one per probe
  std::vector<Cell> confined;
  bool both_entries = false;              // BatteryOptions::both_entries
  std::vector<CatalogueEntry> catalogue;  // BatteryOptions::catalogue, loaded
  nlohmann::ordered_json mutation;        // MutationScore of BatteryOptions::mutation (null without one)
  std::vector<std::string> notes;
  double seconds = 0;
  bool passed = false;
};

Expected<BatteryResult> RunBattery(const BatteryOptions& options);

// The classes the battery proved: policies whose every confined run matched
// the table and actually ran (not refused), when no probe was broken.
std::vector<std::string> ProvenClasses(const BatteryResult& result);

}  // namespace oarbank
