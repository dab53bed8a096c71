// The mutation analysis: how much of the cage the battery would notice
// missing. Each enforcement point of the test-only agent (its
// `mutation-points`, sandbox/cli/mutation_points.h) is removed alone, the
// battery runs against that mutant under the policies the point belongs to,
// and the point counts as
//   killed    some confined cell ESCAPED;
//   changed   no escape, but some cell gave another answer than the table
//             (the layer behind took over);
//   killed in pair  not alone, but some cell ESCAPED with the point removed
//             together with the one point that covers it
//             (escapes/mutation-cover.tsv, harness/mutant_cover.h), and not
//             with the cover removed alone;
//   survived  the battery stayed green with the point gone;
//   explained it survived, and the cover table says why no probe can
//             reach it.
// A report from an earlier run (--killers) makes a run short: each point's
// killers there (or the probes whose answer it changed) run first and
// settle it when they still kill it (or still notice it so), and a point
// it lists as a survivor is not run again (a point that survives now but
// was noticed there, or is new, is a new survivor and fails the run).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/battery.h"
#include "sandbox/common/expected.h"

namespace oarbank {

struct MutantOptions {
  BatteryOptions battery;                // its agent is the test-only build
  std::vector<std::string> only_points;  // ids; empty: every point
  std::string killers;                   // an earlier mutation.json, or ""
  std::string covers;                    // escapes/mutation-cover.tsv, or ""
};

// A confined cell of a mutant's battery that did not match the table.
struct MutantCell {
  std::string probe, policy, entry;
  uid_t uid = 0;
  std::string actual;
};

// A battery policy whose job does more in namespaces of its own (ipc
// "job", debug), and so lacks a point: "n/a" there, with the reason.
struct NotApplicable {
  std::string policy, reason;
};

struct MutantResult {
  std::string id, layer, what;
  std::string var, value;             // the fault variable that removes it
  std::vector<std::string> policies;  // the battery policies that have it
  std::string outcome;                // killed, killed in pair, changed, survived, explained, known survivor
  std::string paired_with;            // the cover removed with it (killed in pair)
  std::string reason;                 // why no probe can reach it (explained)
  // The policies whose plan lacks it because they widen the cage in the
  // job's own namespaces (ipc "job", debug): "n/a" there.
  std::vector<NotApplicable> not_applicable;
  std::vector<MutantCell> killers;  // each ESCAPED cell (in pair: not escaped with the cover alone)
  std::vector<MutantCell> changed;  // each other mismatch (the layer behind answered)
  double seconds = 0;
};

struct MutationReport {
  std::string kernel;
  int abi = 0;
  std::vector<MutantResult> points;
  double seconds = 0;
  int new_survivors = 0;  // survived now, and not a survivor of --killers
};

Expected<MutationReport> RunMutants(const MutantOptions& options);

// The score of a mutation report (mutation.json) for the battery's report:
// its kernel, ABI and policies, the number of points and of each outcome;
// null when there is no such report or it is not one.
nlohmann::ordered_json MutationScore(const std::string& path);

nlohmann::ordered_json MutationJson(const MutationReport& report);
std::string MutationMarkdown(const MutationReport& report);
std::string MutationHtml(const MutationReport& report);
std::string MutationSummary(const MutationReport& report);  // one line per new survivor, then the totals

}  // namespace oarbank
