// Read-only carve-outs inside writable grants. Landlock rules only add
// rights, so a directory inside a writable grant cannot be made read-only by
// a rule; the job's mount namespace does it instead: once the writable
// grants are bound, each carve-out is bound onto itself read-only. A mount
// point cannot be renamed, replaced, removed or unmounted by a process with
// no capability (the job has none, and seccomp refuses mount calls), so the
// carve-out stays where the policy named it. Its ancestors between the
// writable grant and it are bound onto themselves as they are (writable)
// first: a renamed ancestor would carry the carve-out away and leave its
// path free for a new directory.
//
// Where a worktree's history lies, the caller's side, is git_history.h;
// this file is the launcher's: BindReadOnlyCarveOuts, in the mount-namespace
// step. Each carve-out's path is opened again there with no link allowed and
// must be the inode the policy's walk found (plan.inodes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"

namespace oarbank {

// The launcher's half, run in the job's own mount namespace after the
// writable grants are bound: pins the ancestors, binds each of
// plan.read_only_binds read-only onto itself, and checks the result (each
// path, reached with no symlink, is the inode it was and on a read-only
// mount). A failure names the path (mount-namespace step).
std::optional<StepFailure> BindReadOnlyCarveOuts(const Plan& plan);

// The ancestors of `path` strictly between `grant` and it ("/g/a/b/c" in
// "/g": "/g/a", "/g/a/b"), outermost first.
std::vector<std::string> AncestorsWithin(const std::string& grant, const std::string& path);

}  // namespace oarbank
