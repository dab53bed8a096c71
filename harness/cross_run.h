// What one job leaves for the next. A probe named crossrun_* runs twice per
// cell, each time in a fresh layout of its own (so what it plants reaches no
// other probe): the first run, under the policy less its nested grants (the
// earlier session, or the verification run that had no state directory),
// plants something in its writable grant; the second, under the policy
// itself, is the one judged. A grant must never come from what the first
// run wrote: the launcher refuses a path it would reach through a link the
// job could have planted (exit 64).
#pragma once

#include <sys/types.h>

#include <string>

#include "sandbox/common/expected.h"

namespace oarbank {

bool IsCrossRunProbe(const std::string& probe);

struct CrossRunLayout {
  std::string dir;
  std::string grant;      // the role's writable grant in it: work for a runner, data otherwise
  std::string elsewhere;  // outside every grant: `secret`, and `state/secret`
  std::string first_policy, second_policy;
};

// Makes `world_root`/crossrun/`id` (work/ and data/ shaped as the world's,
// with tmp/, agent/state/ and carved/victim; elsewhere/) and writes the two
// policies there: `policy_path` (a battery policy materialized in the world)
// with its work and data moved into the layout, and the first run's, the
// same less `state` and `read_only` and with a `tmp` of its own.
Expected<CrossRunLayout> MakeCrossRunLayout(const std::string& world_root, const std::string& policy_path,
                                            const std::string& id, bool runner);

}  // namespace oarbank
