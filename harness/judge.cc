#include "harness/judge.h"

#include <algorithm>
#include <cstdint>

#include "harness/probe_spawn.h"
#include "sandbox/common/exit_codes.h"

namespace oarbank {
namespace {

std::string ExpectedText(const Expectation& row, int abi, int min_abi) {
  if (abi < min_abi) return "refused (exit 70)";
  switch (row.expect) {
    case Expect::kBlocked: return row.code == "-" ? "blocked" : "blocked " + row.code;
    case Expect::kKilled: return "killed " + row.code;
    case Expect::kAllowed: return "allowed";
    case Expect::kGap: return "gap";
    case Expect::kContained: return "contained";
    case Expect::kRefused: return "refused (exit " + row.code + ")";
  }
  return "?";
}

// A run the launcher had to refuse: egress-any where this host cannot
// enforce it (`unenforceable` says why), or a policy below its Landlock
// ABI. Whether it was such a run (then judged).
bool JudgeRequiredRefusal(Cell& cell, int min_abi, int abi, const std::string& unenforceable) {
  const ProbeRun& r = cell.run;
  const bool refused = r.exit_code == kExitNotEnforced && r.verdict.empty();
  if (!unenforceable.empty() && abi >= min_abi) {
    cell.expected = "refused (exit 70)";
    const bool named = r.stderr_text.find("net.egress-any") != std::string::npos;
    cell.outcome = refused && named ? Outcome::kPass : Outcome::kUnexpected;
    cell.why = refused && named
                   ? unenforceable + ": the launcher must refuse, and did: " + r.stderr_text
                   : unenforceable + ", yet the launcher did not refuse naming net.egress-any: " + r.Summary() + " " +
                         r.stderr_text;
    return true;
  }
  if (abi >= min_abi) return false;
  cell.outcome = refused ? Outcome::kPass : Outcome::kUnexpected;
  cell.why = refused ? "the policy needs Landlock ABI " + std::to_string(min_abi) + ": " + r.stderr_text
                     : "the launcher ran the probe on Landlock ABI " + std::to_string(abi) + " < " +
                           std::to_string(min_abi) + ": " + r.Summary();
  return true;
}

// A row that expects the probe to get through, or to be refused: allowed,
// gap, contained, refused. Whether the row was one (then judged).
bool JudgeOtherThanBlocked(Cell& cell, const Expectation& row, const std::vector<std::string>& evidence) {
  const ProbeRun& r = cell.run;
  const bool got_through = r.verdict == "escaped";
  switch (row.expect) {
    case Expect::kRefused: {
      const bool match = r.verdict.empty() && std::to_string(r.exit_code) == row.code;
      cell.outcome = match ? Outcome::kPass : got_through ? Outcome::kEscaped : Outcome::kUnexpected;
      cell.why = match ? row.why + ": " + r.stderr_text : r.Summary() + " " + r.detail + r.stderr_text;
      return true;
    }
    case Expect::kAllowed:
      cell.outcome = got_through ? Outcome::kPass : Outcome::kUnexpected;
      if (!got_through) cell.why = "a granted operation was refused: " + r.Summary() + " " + r.detail;
      return true;
    case Expect::kGap:
      // Amber only while the gap shows: a gap that closed makes its row stale.
      cell.outcome = got_through ? Outcome::kGap : Outcome::kUnexpected;
      if (!got_through)
        cell.why = "the known gap did not show (" + r.Summary() + "): update its row in expectations.tsv";
      return true;
    case Expect::kContained:
      // The probe's verdict says only that it started; what outlived the
      // job is seen from outside.
      if (!evidence.empty()) {
        cell.outcome = Outcome::kEscaped;
        cell.why = "seen from outside: " + evidence.front();
      } else if (!got_through) {
        cell.outcome = Outcome::kUnexpected;
        cell.why = "the probe did not start what the supervisor must contain: " + r.Summary() + " " + r.detail;
      } else {
        cell.why = "nothing of it was left when the job ended (checked from outside): " + row.why;
      }
      return true;
    case Expect::kBlocked:
    case Expect::kKilled: return false;
  }
  return false;
}

}  // namespace

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass: return "PASS";
    case Outcome::kGap: return "GAP";
    case Outcome::kUnsupported: return "UNSUPPORTED";
    case Outcome::kBroken: return "BROKEN";
    case Outcome::kEscaped: return "ESCAPED";
    case Outcome::kUnexpected: return "UNEXPECTED";
  }
  return "?";
}

bool IsFailure(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
    case Outcome::kGap:
    case Outcome::kUnsupported: return false;
    case Outcome::kBroken:
    case Outcome::kEscaped:
    case Outcome::kUnexpected: return true;
  }
  return true;
}

std::string ProbeRun::Summary() const {
  if (timed_out) return "timed out";
  if (signal != 0) return "killed " + SignalName(signal);
  if (!verdict.empty()) return verdict + (err.empty() ? "" : " " + err);
  if (exit_code == kExitNotEnforced) return "refused (exit 70)";
  if (exit_code == kExitUsage) return "refused (exit 64)";
  return "exit " + std::to_string(exit_code) + ", no verdict line";
}

void ResolveSent(ProbeRun& run, SignalSinks& sinks, uid_t uid, const std::vector<std::string>& arrivals) {
  if (run.verdict != "sent") return;
  const auto taken = sinks.TakePending(uid);
  if (!taken.ok()) {
    run.verdict = "error";
    run.detail += "; " + taken.error().where + ": " + taken.error().what;
    return;
  }
  const uint64_t pending = taken.value();
  if (pending != 0) {
    std::string names;
    for (int sig = 1; sig <= 64; ++sig)
      if (pending & (1ull << (sig - 1))) names += (names.empty() ? "" : ", ") + SignalName(sig);
    run.verdict = "escaped";
    run.detail += "; pending at the signal sink outside the cage: " + names;
  } else if (!arrivals.empty()) {
    run.verdict = "escaped";
    run.detail += "; arrived outside the cage: " + arrivals.front();
  } else {
    run.verdict = "blocked";
    run.err.clear();
    run.detail += "; nothing reached the signal sink or a listener";
  }
}

void SettleAbsentRoute(Cell& cell, const Cell& unconfined) {
  // Only a row that expects the probe allowed: one that expects a refusal
  // (exit 70, below the policy's ABI) is failed by any probe that ran.
  if (cell.expected != "allowed" || unconfined.outcome != Outcome::kUnsupported ||
      cell.outcome != Outcome::kUnexpected || cell.run.verdict != "unsupported")
    return;
  cell.outcome = Outcome::kUnsupported;
  cell.why = "no route here, unconfined either: " + cell.run.detail;
}

void Judge(Cell& cell, const Expectation* row, int policy_min_abi, int abi, const std::vector<std::string>& evidence,
           const std::string& unenforceable) {
  const ProbeRun& r = cell.run;
  if (row == nullptr) {
    cell.outcome = Outcome::kUnexpected;
    cell.why = "no row in expectations.tsv";
    return;
  }
  const int min_abi = std::max(row->min_abi, policy_min_abi);
  cell.expected = ExpectedText(*row, abi, min_abi);
  cell.why = row->why;
  if (JudgeRequiredRefusal(cell, min_abi, abi, unenforceable)) return;
  if (row->expect != Expect::kRefused && r.exit_code == kExitNotEnforced && r.verdict.empty()) {
    cell.outcome = Outcome::kUnexpected;
    cell.why = "refused by the launcher: " + r.stderr_text;
    return;
  }
  if (JudgeOtherThanBlocked(cell, *row, evidence)) return;
  // Blocked or killed: anything that got through, or was seen from outside,
  // escaped.
  if (r.verdict == "escaped" || !evidence.empty()) {
    cell.outcome = Outcome::kEscaped;
    cell.why = r.verdict == "escaped" ? r.detail : "seen from outside: " + evidence.front();
    return;
  }
  if (r.verdict == "unsupported") {
    cell.outcome = Outcome::kUnsupported;
    cell.why = r.detail;
    return;
  }
  const bool match = row->expect == Expect::kBlocked
                         ? (r.verdict == "blocked" && r.err == (row->code == "-" ? "" : row->code))
                         : (r.signal != 0 && SignalName(r.signal) == row->code);
  cell.outcome = match ? Outcome::kPass : Outcome::kUnexpected;
  if (!match) cell.why = r.detail.empty() ? r.stderr_text : r.detail;
}

}  // namespace oarbank
