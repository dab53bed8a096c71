// bench/minilaunch: the floor a launcher of this design can reach on this
// machine, measured by bench/run.sh next to `oarbank-agent sandbox-exec`.
//
//   minilaunch [-L] [-S] [-N DIR... | -J DIR... [-E]] -- ARGV
//
// It does the least a cage needs and nothing else: no_new_privs, a Landlock
// ruleset that handles every filesystem right of the running ABI with ten
// fixed path rules (the current directory is the writable one), a 40-rule
// libseccomp deny-list, then execvp. -L skips Landlock, -S skips seccomp.
// -N DIR first makes what sandbox-exec's read-only mounts need: a user and
// mount namespace (the caller's ids mapped to themselves), every mount
// private and read-only, and DIR bound back writable, nosuid, nodev and
// noexec. -N (or -J) may be given up to kMaxDirs times, one bind each, so the
// floor makes as many binds as the policy it is compared with has writable
// grants (bench/run.sh's and bench/supervise.sh's have three: work, data and
// tmp). -J DIR is the floor of a supervised job (`oarbank-agent run`,
// measured by bench/supervise.sh): the command runs as pid 2 of the fresh
// user, mount, pid, net, ipc and uts namespaces a job gets, under an init
// that mounts the pid namespace's /proc and waits for it; this process
// writes init's id maps (its ids mapped to themselves), releases it, and
// returns when init is reaped, that is when the job's namespaces are gone,
// as `run` waits for them before it returns. The command makes the
// read-only view as -N does (in the job's mount namespace), then the rest. -E returns as soon as init reports the
// command's status, before its namespaces are torn down: what bubblewrap
// does (its init exits while bwrap returns). No policy file, no host
// report, no capability drop, no cgroup leaf, no gate: it is a yardstick
// for what the launcher's own work costs above one extra exec, never a
// sandbox to run anything with. Linked statically against the same C
// library as oarbank-agent, so the two pay the same start-up.
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// The 6.1 UAPI headers stop at ABI 2; the later rights, from the kernel's
// documented values.
#define FS_REFER (1ULL << 13)
#define FS_TRUNCATE (1ULL << 14)
#define FS_IOCTL_DEV (1ULL << 15)

// The most writable directories (-N or -J) one launch binds.
enum { kMaxDirs = 8 };

// The writable directories, each bound back noexec in the read-only view.
struct Dirs {
  const char* path[kMaxDirs];
  int count;
};

static uint64_t HandledFs(int abi) {
  uint64_t fs = (1ULL << 13) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) fs |= FS_REFER;
  if (abi >= 3) fs |= FS_TRUNCATE;
  if (abi >= 5) fs |= FS_IOCTL_DEV;
  return fs;
}

static int Fail(const char* what) {
  fprintf(stderr, "minilaunch: %s: %s\n", what, strerror(errno));
  return 70;
}

static int ApplyLandlock(void) {
  const int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return Fail("landlock ABI");
  const uint64_t fs = HandledFs(abi);
  struct landlock_ruleset_attr attr = {.handled_access_fs = fs};
  const int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) return Fail("landlock_create_ruleset");
  const uint64_t read_exec = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
  const uint64_t dev = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;
  const struct {
    const char* path;
    uint64_t access;
  } rules[] = {
      {"/usr", read_exec}, {"/lib", read_exec},   {"/lib64", read_exec},    {"/bin", read_exec},
      {"/sbin", read_exec}, {"/etc", read_exec}, {"/proc", read_exec},    {"/dev/null", dev},
      {"/dev/urandom", dev}, {".", fs},
  };
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    struct landlock_path_beneath_attr beneath = {.allowed_access = rules[i].access & fs};
    beneath.parent_fd = open(rules[i].path, O_PATH | O_CLOEXEC);
    if (beneath.parent_fd < 0) continue;  // /lib64 and /sbin may be absent
    const long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    close(beneath.parent_fd);
    if (rc != 0) return Fail(rules[i].path);
  }
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return Fail("landlock_restrict_self");
  close(ruleset);
  return 0;
}

static int ApplySeccomp(void) {
  static const char* const kDenied[] = {
      "mount", "umount2", "pivot_root", "chroot", "ptrace", "bpf", "keyctl", "add_key",
      "request_key", "perf_event_open", "userfaultfd", "process_vm_readv", "process_vm_writev",
      "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon",
      "swapoff", "reboot", "setns", "unshare", "acct", "quotactl", "open_by_handle_at",
      "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register", "fsopen",
      "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr",
      "lookup_dcookie", "iopl", "ioperm",
  };
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return Fail("seccomp_init");
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (size_t i = 0; i < sizeof kDenied / sizeof kDenied[0]; i++) {
    const int nr = seccomp_syscall_resolve_name(kDenied[i]);
    if (nr == __NR_SCMP_ERROR || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) != 0) {
      seccomp_release(ctx);
      errno = EINVAL;
      return Fail(kDenied[i]);
    }
  }
  const int rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    errno = -rc;
    return Fail("seccomp_load");
  }
  return 0;
}

static int WriteFile(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

// Maps `pid`'s user namespace: uid and gid to themselves, setgroups denied.
static int MapIds(const char* pid, unsigned uid, unsigned gid) {
  char path[64], map[64];
  snprintf(path, sizeof path, "/proc/%s/setgroups", pid);
  if (WriteFile(path, "deny") != 0) return Fail("setgroups");
  snprintf(path, sizeof path, "/proc/%s/uid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
  if (WriteFile(path, map) != 0) return Fail("uid_map");
  snprintf(path, sizeof path, "/proc/%s/gid_map", pid);
  snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
  if (WriteFile(path, map) != 0) return Fail("gid_map");
  return 0;
}

// The mounts of sandbox-exec's read-only view, in the caller's (new) mount
// namespace: each writable directory cloned and made nosuid, nodev and
// noexec, every mount made read-only, then each clone moved back on its
// directory, in the order given (a directory inside another after it).
static int ReadOnlyMounts(const struct Dirs* dirs) {
  int dir[kMaxDirs], tree[kMaxDirs];
  if (syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return Fail("make / private");
  for (int i = 0; i < dirs->count; i++) {
    dir[i] = open(dirs->path[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir[i] < 0) return Fail(dirs->path[i]);
    tree[i] = (int)syscall(SYS_open_tree, dir[i], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree[i] < 0) return Fail("open_tree");
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
    if (syscall(SYS_mount_setattr, tree[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
      return Fail("mount_setattr noexec");
  }
  struct mount_attr read_only = {.attr_set = MOUNT_ATTR_RDONLY};
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof read_only) != 0)
    return Fail("make every mount read-only");
  for (int i = 0; i < dirs->count; i++) {
    // Opened again by name: a directory inside one bound before is reached
    // through that bind, not the mount it now covers.
    close(dir[i]);
    const int target = open(dirs->path[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (target < 0) return Fail(dirs->path[i]);
    if (syscall(SYS_move_mount, tree[i], "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      return Fail("bind a writable directory");
    close(tree[i]);
    close(target);
  }
  return 0;
}

// The namespaces and mounts of sandbox-exec's read-only view.
static int ReadOnlyView(const struct Dirs* dirs) {
  const unsigned uid = getuid(), gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return Fail("unshare");
  if (MapIds("self", uid, gid) != 0) return 70;
  return ReadOnlyMounts(dirs);
}

static int Confine(int landlock, int seccomp) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Fail("no_new_privs");
  if (landlock && ApplyLandlock() != 0) return 70;
  if (seccomp && ApplySeccomp() != 0) return 70;
  return 0;
}

static int StatusCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// -J: init (pid 1 of the job's namespaces) once released: the pid
// namespace's /proc, then the command as its child, confined; its status
// written to `report`, then init's own.
static int JobInit(int release, int report, const struct Dirs* dirs, int landlock, int seccomp, char** argv) {
  char go;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return Fail("parent-death signal");
  if (read(release, &go, 1) != 1) return 70;
  if (syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return Fail("make / private");
  if (syscall(SYS_mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
    return Fail("mount /proc");
  const pid_t command = fork();
  if (command < 0) return Fail("fork");
  if (command == 0) {
    if (ReadOnlyMounts(dirs) != 0 || Confine(landlock, seccomp) != 0) _exit(70);
    execvp(argv[0], argv);
    fprintf(stderr, "minilaunch: exec %s: %s\n", argv[0], strerror(errno));
    _exit(71);
  }
  int status = 0;
  while (waitpid(command, &status, 0) < 0)
    if (errno != EINTR) return Fail("waitpid");
  const int code = StatusCode(status);
  if (write(report, &code, sizeof code) != sizeof code) return Fail("report");
  return code;
}

// -J: clone init into the job's namespaces, map its ids, release it, and
// return the command's status when init is reaped (or, with `early`, as
// soon as init reports it).
static int Job(const struct Dirs* dirs, int early, int landlock, int seccomp, char** argv) {
  const int kFlags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  const unsigned uid = getuid(), gid = getgid();
  int release[2], report[2];
  if (pipe2(release, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) return Fail("pipe");
  const pid_t init = (pid_t)syscall(SYS_clone, kFlags | SIGCHLD, NULL, NULL, NULL, NULL);
  if (init < 0) return Fail("clone");
  if (init == 0) {
    close(release[1]);
    close(report[0]);
    _exit(JobInit(release[0], report[1], dirs, landlock, seccomp, argv));
  }
  close(release[0]);
  close(report[1]);
  char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)init);
  if (MapIds(pid, uid, gid) != 0 || write(release[1], "G", 1) != 1) {
    kill(init, SIGKILL);
    waitpid(init, NULL, 0);
    return 70;
  }
  close(release[1]);
  int code = 70;
  const int reported = read(report[0], &code, sizeof code) == sizeof code;
  if (early && reported) return code;
  int status = 0;
  while (waitpid(init, &status, 0) < 0)
    if (errno != EINTR) return Fail("waitpid init");
  return reported ? code : StatusCode(status);
}

static int Usage(void) {
  fprintf(stderr, "usage: minilaunch [-L] [-S] [-N DIR... | -J DIR... [-E]] -- ARGV\n");
  return 64;
}

int main(int argc, char** argv) {
  int landlock = 1, seccomp = 1, early = 0, i = 1;
  struct Dirs dirs = {.count = 0};
  char mode = 0;  // 'N' or 'J', as the directories were given
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if ((strcmp(argv[i], "-N") == 0 || strcmp(argv[i], "-J") == 0) && i + 1 < argc) {
      if ((mode != 0 && mode != argv[i][1]) || dirs.count == kMaxDirs) return Usage();
      mode = argv[i][1];
      dirs.path[dirs.count++] = argv[++i];
    } else if (strcmp(argv[i], "-E") == 0) {
      early = 1;
    } else if (strcmp(argv[i], "-L") == 0) {
      landlock = 0;
    } else if (strcmp(argv[i], "-S") == 0) {
      seccomp = 0;
    } else {
      return Usage();
    }
  }
  if (i + 1 >= argc || (early && mode != 'J')) return Usage();
  if (mode == 'J') return Job(&dirs, early, landlock, seccomp, argv + i + 1);
  if (mode == 'N' && ReadOnlyView(&dirs) != 0) return 70;
  if (Confine(landlock, seccomp) != 0) return 70;
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "minilaunch: exec %s: %s\n", argv[i + 1], strerror(errno));
  return 71;
}
