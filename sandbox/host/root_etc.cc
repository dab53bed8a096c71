#include "sandbox/host/root_etc.h"

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/write_file.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace oarbank {
namespace {

// On-disk root becomes 65534 (kRootEtcOwner) on the view; no other id is
// mapped, so every other owner is nobody. Root (fsuid 0, fsgid 0) owns
// nothing there.
constexpr char kIdmap[] = "0 65534 1\n";
static_assert(kRootEtcOwner == 65534, "kIdmap maps on-disk root to kRootEtcOwner");

std::string Why(const char* what, int err) { return std::string(what) + ": " + strerror(err); }

// The child that holds the namespace. It shares the caller's memory
// (CLONE_VM: no copy of a large process's page tables, five times cheaper
// here than a fork), so it only blocks on its own stack until the caller
// kills it. It starts with every signal blocked: no handler of the caller's
// can run on its stack, and pause() returns for none. SIGKILL cannot be
// blocked, so it is also its parent-death signal: if the caller dies (by
// any signal) before its kill, the holder dies with it, and one whose
// caller died before the prctl (its parent is then another process) ends
// at once. Raw system calls only: errno is the caller's thread's.
pid_t holder_parent = 0;

int HoldNamespace(void*) {
  syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (syscall(SYS_getppid) != holder_parent) syscall(SYS_exit, 0);
  for (;;) pause();
}

// The holder's stack: its own, not a frame of the caller's, because the
// caller goes on while the killed holder dies on the other CPU and reaps it
// later (ReapHolder). One holder per process: OpenRootEtcView runs once
// (ProbeRootEtc keeps its result).
alignas(64) char holder_stack[8192];

// A user namespace holding only kIdmap, as an fd; -1 and `why` otherwise.
// The holder is killed before this returns; `holder` is set for ReapHolder.
int IdmapUserNamespace(std::string& why, pid_t& holder) {
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  holder_parent = getpid();
  const pid_t child =
      clone(HoldNamespace, holder_stack + sizeof holder_stack, CLONE_VM | CLONE_NEWUSER | SIGCHLD, nullptr);
  const int clone_err = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  holder = child;
  if (child < 0) {
    why = Why("clone(CLONE_NEWUSER)", clone_err);
    return -1;
  }
  FaultPause("idmap-holder", child);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/uid_map", static_cast<int>(child));
  const int uid_err = WriteWholeFile(path, kIdmap);
  snprintf(path, sizeof path, "/proc/%d/gid_map", static_cast<int>(child));
  const int gid_err = uid_err != 0 ? 0 : WriteWholeFile(path, kIdmap);
  snprintf(path, sizeof path, "/proc/%d/ns/user", static_cast<int>(child));
  int ns = -1;
  if (uid_err != 0 || gid_err != 0)
    why = Why(uid_err != 0 ? "uid_map" : "gid_map", uid_err != 0 ? uid_err : gid_err);
  else if ((ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    why = Why("open ns/user", errno);
  // The open fd keeps the namespace; the holder is no longer needed.
  kill(child, SIGKILL);
  return ns;
}

void ReapHolder(pid_t holder) {
  if (holder <= 0) return;
  while (waitpid(holder, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

int MakeRootEtcTree(int idmap_fd) {
  int tree =
      static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, "/etc", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
  if (tree < 0) return -errno;
  // Never a stdio number: a caller that closed stdio later dup2s onto them.
  if (tree <= 2) {
    const int moved = fcntl(tree, F_DUPFD_CLOEXEC, 3);
    const int err = errno;
    close(tree);
    if (moved < 0) return -err;
    tree = moved;
  }
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<uint64_t>(idmap_fd);
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    const int err = errno;
    close(tree);
    return -err;
  }
  return tree;
}

RootEtcView OpenRootEtcView() {
  RootEtcView view;
  std::string why;
  pid_t holder = -1;
  const int ns = IdmapUserNamespace(why, holder);
  // The killed holder exits while the proof tree is made.
  const int tree = ns < 0 ? -EBADF : MakeRootEtcTree(ns);
  ReapHolder(holder);
  if (ns < 0) {
    view.detail = why;
    return view;
  }
  if (tree < 0) {
    view.detail = Why("idmap a copy of /etc (open_tree, mount_setattr)", -tree);
    close(ns);
    return view;
  }
  view.idmap = std::make_shared<const UniqueFd>(ns);
  view.proof_tree = std::make_shared<const UniqueFd>(tree);
  return view;
}

int AttachRootEtcTree(int tree_fd) {
  if (syscall(SYS_move_mount, tree_fd, "", AT_FDCWD, "/etc", MOVE_MOUNT_F_EMPTY_PATH) != 0) return errno;
  return 0;
}

}  // namespace oarbank
