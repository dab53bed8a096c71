// How one run of a probe is judged: its verdict line, what the world saw
// from outside, and the expectations table's row for its cell.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "harness/battery.h"
#include "harness/expectations.h"
#include "harness/world.h"

namespace oarbank {

// A probe that says "sent" cannot see whether what it sent arrived (a
// signal the kernel may drop without saying so, a datagram): the world says.
// A signal pending at the probe's sink (world.h), or an arrival at a
// listener naming the probe: it got out. Neither: it was dropped, which no
// call reports, so blocked carries no errno.
void ResolveSent(ProbeRun& run, SignalSinks& sinks, uid_t uid, const std::vector<std::string>& arrivals);

// A confined cell whose probe said "unsupported" where its unconfined run
// said so too: the route does not exist on this kernel or architecture
// (uprobe on arm64), so a row that expects it allowed is not refused by the
// cage. Such a cell becomes UNSUPPORTED; a probe whose route exists
// unconfined and answers "unsupported" confined stays a refusal, and a row
// that expects the launcher to refuse is failed by any probe that ran.
void SettleAbsentRoute(Cell& cell, const Cell& unconfined);

// Compares one confined run with its row (and what the world saw): sets the
// cell's expected text, outcome and why. `row` null: the cell has no row.
// `unenforceable` names what this host lacks for the policy (egress-any's
// job network): then, as below its Landlock ABI, the launcher must refuse.
void Judge(Cell& cell, const Expectation* row, int policy_min_abi, int abi, const std::vector<std::string>& evidence,
           const std::string& unenforceable);

}  // namespace oarbank
