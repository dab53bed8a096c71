// A module launched as root would read /etc's root-only files (shadow, SSH
// host keys, sudoers) as their owner: dropping capabilities does not stop an
// owner. The launcher therefore shows root an idmapped copy of /etc, in
// which on-disk uid and gid 0 appear as 65534 and every other owner as
// nobody at all: root then reads there exactly what any user may read, and
// a file made root-only later stays root-only (no list to go stale).
//
// Idmapped mounts need Linux 5.12 and a filesystem that supports them
// (ext4, xfs, btrfs; tmpfs from 6.3). Where either is missing, the caller
// falls back to narrowing the /etc grant to its world-readable parts.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "sandbox/common/unique_fd.h"

namespace oarbank {

// The owner on-disk uid 0 has in the view (the idmap's only entry): the
// gate reads it back on the job's /etc.
inline constexpr uid_t kRootEtcOwner = 65534;

// The probe's result: a user namespace whose only mapping is 0 -> 65534,
// kept to idmap a fresh copy of /etc at each launch (a detached tree can be
// mounted once only), or why the host cannot.
struct RootEtcView {
  // Each closed when the last copy of its shared_ptr goes (a forked child
  // uses get() and never runs the destructor).
  std::shared_ptr<const UniqueFd> idmap;  // set: idmapped /etc works here
  std::string detail;                     // why not, when idmap is unset
  // The copy of /etc that proved it, detached (MakeRootEtcTree). A launch
  // may attach it instead of making its own; it mounts once, so
  // ProbeRootEtc hands it to its first caller only.
  std::shared_ptr<const UniqueFd> proof_tree;
};

// Needs CAP_SYS_ADMIN and CAP_SETUID in the initial user namespace (root):
// clones a short-lived child into a new user namespace mapped 0 -> 65534,
// keeps that namespace, and proves it by idmapping a copy of /etc once.
// Runs once per process (its holder child has one static stack).
RootEtcView OpenRootEtcView();

// A detached, read-only, nosuid, nodev copy of /etc (recursive,
// close-on-exec) idmapped through `idmap_fd`, or -errno. Needs the same
// privileges, in the initial user namespace. Allocates nothing (safe after
// fork).
int MakeRootEtcTree(int idmap_fd);

// Attaches a tree from MakeRootEtcTree over /etc in the caller's private
// mount namespace. Returns 0 or an errno.
int AttachRootEtcTree(int tree_fd);

}  // namespace oarbank
