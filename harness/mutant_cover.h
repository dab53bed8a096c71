// escapes/mutation-cover.tsv: for an enforcement point the battery cannot
// see removed alone, what covers it. Two layers often guard the same thing
// (the read-only mounts before Landlock's write rights, the user namespace
// before the mount rows, the launcher's step before the gate's check of it):
// such a point is proven by a pair mutant, the point removed together with
// the other point named here, and the cells that escape then but not with
// the cover removed alone are the point's own killers. Where three layers
// answer alike (seccomp's ptrace row, Landlock's ptrace restriction and the
// user namespace), the cover names the two others joined by "+", removed
// together. A point no probe can reach has "-" and the reason instead.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank {

struct MutantCover {
  std::string point;
  std::string cover;  // a point id, or several joined by "+", or "-"
  std::string why;
  int line = 0;
};

// The table by point: tab-separated point, cover, why; a header line.
// One line naming the file and the line otherwise.
Expected<std::map<std::string, MutantCover>> LoadMutantCovers(const std::string& path);

// The point ids a cover names ("a+b": a and b); none for "-".
std::vector<std::string> CoverPoints(const std::string& cover);

// The environment that removes every point of `vars` (NAME=VALUE each):
// values of the same variable joined by commas (the test-only agent's
// OARBANK_FAULT_MUTANT and OARBANK_FAULT_SKIP_STEP take lists).
std::vector<std::string> MergeFaultEnv(const std::vector<std::pair<std::string, std::string>>& vars);

}  // namespace oarbank
