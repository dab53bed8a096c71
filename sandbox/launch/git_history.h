// Where a worktree's history lies, read as untrusted input (the caller's
// side, before the job): a worktree the job may write holds a `.git` the job
// may have written in an earlier run, so what it names is granted only when
// it proves itself the way git itself ties the pieces together:
//
//   .git directory      the history is that directory; a `commondir` in it
//                       (git writes one only under another repository's
//                       worktrees/) is refused
//   .git file           "gitdir: PATH". PATH must be a git directory (HEAD,
//                       and objects/ and refs/ in its common directory) that
//                       names this worktree back:
//                         a linked worktree (`git worktree add`): PATH holds
//                         `commondir` and `gitdir`, which names this
//                         worktree's .git, and the common directory holds
//                         PATH as worktrees/<name>;
//                         a submodule: PATH/config sets core.worktree to
//                         this worktree.
//                       Anything else (a `--separate-git-dir` repository,
//                       which git leaves no back-pointer for, or a pointer
//                       a job planted at ~/.ssh or /) is refused with one
//                       line, unless the caller names the git directory
//                       itself (`git_dir`, `cage --git-dir`).
//
// Each file is read with no link followed, each directory a pointer names
// is resolved as a grant path (common/grant_path.h). Nothing here mounts:
// the paths become read-only carve-outs or read-only grants of the policy
// (supervise/supervisor.h PolicyForSpec), bound by carve_out.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank {

struct GitCarveOuts {
  std::string dot_git;     // <worktree>/.git: the directory, or the pointer file
  bool pointer = false;    // dot_git is a "gitdir: ..." file
  std::string git_dir;     // the git directory (dot_git itself for a directory)
  std::string common_dir;  // its commondir, or git_dir when it names none
  // Every path above, once each, outermost first.
  std::vector<std::string> Paths() const;
};

// The largest .git pointer, commondir or gitdir file read.
inline constexpr size_t kGitPointerMaxBytes = 4096;
// The largest git config read for core.worktree.
inline constexpr size_t kGitConfigMaxBytes = 64 << 10;

// `worktree`: a canonical absolute directory. Nothing when it has no .git.
// `git_dir`: the caller's word for the git directory (empty: none); the
// pointer must then name it, and the back-pointer is not asked for. An Error
// (where: the file at fault) for anything that does not prove itself.
Expected<std::optional<GitCarveOuts>> ResolveGitCarveOuts(const std::string& worktree, const std::string& git_dir = "");

// Where a worktree without a .git of its own stands: the nearest directory
// above it that has a .git (it is a subdirectory of that checkout), or ""
// (no repository at all). Looks only (lstat), follows nothing.
std::string EnclosingCheckout(const std::string& worktree);

// Reads one value of a git config text: `key` ("worktree") in section
// `section` ("core"), the last one set, unquoted; nothing when unset.
// Include directives are not followed.
std::optional<std::string> GitConfigValue(const std::string& text, const std::string& section, const std::string& key);

}  // namespace oarbank
