// escapes/expectations.tsv: what each probe must show, confined, under each
// battery policy and entry point. One row per (probe, policy, entry);
// policy "*" covers every policy without a row of its own, and a policy
// whose row needs a higher Landlock ABI than the host has; entry "*" covers
// both entry points (the bare launcher, sandbox-exec, and the supervisor,
// run), "run" or "sandbox-exec" one of them where they answer differently
// (a pid namespace hides a host process that the bare launcher still sees).
// A row whose probe is "(policy)" and whose expect is "runs" states the
// Landlock ABI a policy needs at all.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank {

enum class Expect {
  kBlocked,  // the probe says blocked, with this errno
  kKilled,   // the probe dies by this signal (seccomp's bad-arch kill)
  kAllowed,  // a positive control: the policy grants it, the probe must get through
  kGap,      // a known gap closed by a later layer (the row says which); shown, never hidden
  // Run under the supervisor (`oarbank-agent run`), whose job containment
  // is what stops it: the probe must start what it starts, and nothing of
  // it may be left when the job has ended (checked from outside).
  kContained,
  // The launcher refuses the run with this exit code before the probe
  // starts: a crossrun_* probe's second run, when the first planted a link
  // where the policy names a path (64: the policy is refused) or a .git
  // pointer that does not prove itself (70: cage cannot protect it).
  kRefused,
};
const char* ExpectName(Expect expect);

struct Expectation {
  std::string probe;
  std::string policy;  // or "*"
  std::string entry;   // "sandbox-exec", "run" or "*"
  int min_abi = 0;     // below it the launcher must refuse the policy (exit 70)
  Expect expect = Expect::kBlocked;
  std::string code;  // errno name, signal name, exit code (refused), or "-"
  std::string why;
  int line = 0;
};

class Expectations {
 public:
  static Expected<Expectations> Load(const std::string& path);
  // The row for (probe, policy) if `abi` reaches its min_abi, else
  // (probe, "*"), else the policy's own row (whose min_abi then says the
  // policy is refused), else none; at each step a row of `entry` before
  // one of "*". A policy's row can so state what changes from some ABI on
  // (runner_broker: RESOLVE_UNIX from ABI 9, the seccomp rule of every
  // policy below it).
  const Expectation* Find(const std::string& probe, const std::string& policy, int abi,
                          const std::string& entry = "sandbox-exec") const;
  std::vector<std::string> Probes() const;
  // A policy's own floor, from its "(policy)" row: below it the launcher
  // must refuse every run under that policy. 0 when it has no such row.
  int PolicyMinAbi(const std::string& policy) const;

 private:
  const Expectation* Row(const std::string& probe, const std::string& policy, const std::string& entry) const;
  std::map<std::tuple<std::string, std::string, std::string>, Expectation> rows_;
  std::map<std::string, int> policy_min_abi_;
};

}  // namespace oarbank
