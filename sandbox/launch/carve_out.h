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
// Two halves:
//   ResolveGitCarveOuts  (the caller's side, before the job) where a
//                        worktree's history lies: its .git directory, or the
//                        .git pointer file together with the git directory
//                        and the common directory it resolves to, read with
//                        no symbolic link followed below the worktree or in
//                        the paths the pointer names;
//   BindReadOnlyCarveOuts  (the launcher's mount-namespace step) the binds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"

namespace oarbank {

struct GitCarveOuts {
  std::string dot_git;     // <worktree>/.git: the directory, or the pointer file
  bool pointer = false;    // dot_git is a "gitdir: ..." file
  std::string git_dir;     // the git directory (dot_git itself for a directory)
  std::string common_dir;  // its commondir, or git_dir when it names none
  // Every path above, once each, outermost first.
  std::vector<std::string> Paths() const;
};

// The largest .git pointer or commondir file read.
inline constexpr size_t kGitPointerMaxBytes = 4096;

// `worktree`: a canonical absolute directory. Nothing when it has no .git.
// An Error (where: the file) when .git, or any directory the pointer or
// commondir names, is a symbolic link or holds one, is not a regular file or
// directory, or does not say "gitdir: PATH".
Expected<std::optional<GitCarveOuts>> ResolveGitCarveOuts(const std::string& worktree);

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
