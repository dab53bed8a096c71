// bench/netns_ahead: what a job's start would gain if its network namespace
// were made while the supervisor still works (reads the policy, probes,
// plans), instead of inside the one clone of its six namespaces.
//
//   netns_ahead [ROUNDS]   (default 200; as root or as any user with user namespaces)
//
// For each amount of the supervisor's own work W (0, 0.5 and 1 ms of busy
// time, standing in for its start-up, policy and plan), rounds alternate
// between three ways to the job's init, each timed from its start to init
// reaped:
//   one clone: W, then clone3 of user, net, mount, pid, ipc and uts
//     namespaces; init's id maps written from outside (what `run` does);
//   ahead:     a child sharing this process's memory made in a new user
//     namespace (its id maps written from outside) unshares a network
//     namespace there while this process does W; then a vfork child joins
//     both and clones init into new mount, pid, ipc and uts namespaces as
//     this process's child (CLONE_PARENT);
//   five:      the same, with the mount, ipc and uts namespaces made by the
//     holder too, so that init's clone makes only its pid namespace: the
//     most that can be made ahead, since a pid namespace cannot be held
//     before its init exists (/proc/PID/ns/pid_for_children refuses to
//     open until then).
// A last row, "idle", is a running agent between two jobs: every way first
// waits 3 ms (the agent waiting for its next job; the ahead ways' holders
// are made before that wait, for the job to come), then each is timed from
// the job's start with no work. It is the most namespaces made ahead could
// take off `cage::RunPolicy`'s path, where the wait between jobs hides the
// whole of their making.
// Each init checks that its user, network and mount namespaces are not the
// caller's before it exits (a round that is not is an error, exit 1). It
// prints the median of each way and each ahead way / one clone. Nothing
// here is the sandbox: it measures a change to how its namespaces are made.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kMaxRounds = 2000 };

static char holder_stack[16384] __attribute__((aligned(64)));
static char joiner_stack[16384] __attribute__((aligned(64)));
static volatile int holder_ready;
static int user_fd = -1, net_fd = -1, mnt_fd = -1, ipc_fd = -1, uts_fd = -1;
// The namespaces the holder unshares (besides its user namespace): CLONE_NEWNET,
// or with CLONE_NEWNS, CLONE_NEWIPC and CLONE_NEWUTS for the `five` way.
static int holder_flags;
static long joined_init = -1;
static char own_user[64], own_net[64], own_mnt[64];

// The wait between two jobs of a running agent in the "idle" row.
static const struct timespec kBetweenJobs = {0, 3000000};

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void Busy(double us) {
  const double start = Now();
  while (Now() - start < us) {
  }
}

static int Die(const char* what) {
  fprintf(stderr, "netns_ahead: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void WriteProc(pid_t pid, const char* name, const char* text) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) Die(path);
  close(fd);
}

static void MapIds(pid_t pid) {
  char map[64];
  WriteProc(pid, "setgroups", "deny");
  snprintf(map, sizeof map, "%u %u 1\n", getuid(), getuid());
  WriteProc(pid, "uid_map", map);
  snprintf(map, sizeof map, "%u %u 1\n", getgid(), getgid());
  WriteProc(pid, "gid_map", map);
}

static void NsLink(const char* pid, const char* ns, char* out, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%s/ns/%s", pid, ns);
  const ssize_t n = readlink(path, out, size - 1);
  out[n < 0 ? 0 : n] = '\0';
}

// init: exits 0 only in a user, a network and a mount namespace of its own.
static void Init(void) {
  char user[64], net[64], mnt[64];
  NsLink("self", "user", user, sizeof user);
  NsLink("self", "net", net, sizeof net);
  NsLink("self", "mnt", mnt, sizeof mnt);
  _exit(user[0] != '\0' && net[0] != '\0' && mnt[0] != '\0' && strcmp(user, own_user) != 0 &&
                strcmp(net, own_net) != 0 && strcmp(mnt, own_mnt) != 0
            ? 0
            : 3);
}

static void ReapInit(pid_t init) {
  int status = 0;
  if (waitpid(init, &status, 0) != init) Die("waitpid init");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "netns_ahead: init was not in a user, network and mount namespace of its own\n");
    exit(1);
  }
}

static double OneClone(double work, int idle) {
  if (idle) nanosleep(&kBetweenJobs, NULL);
  const double start = Now();
  Busy(work);
  struct clone_args args = {.flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                     CLONE_NEWUTS,
                            .exit_signal = SIGCHLD};
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) Die("pipe");
  const long init = syscall(SYS_clone3, &args, sizeof args);
  if (init < 0) Die("clone3");
  if (init == 0) {
    char go;
    close(sync[1]);
    if (read(sync[0], &go, 1) != 1) _exit(4);
    Init();
  }
  close(sync[0]);
  MapIds((pid_t)init);
  if (write(sync[1], "G", 1) != 1) Die("release init");
  close(sync[1]);
  ReapInit((pid_t)init);
  return Now() - start;
}

// The holder: unshares holder_flags' namespaces in its new user namespace,
// says so, and waits to be killed. Raw calls only: it shares our memory.
static int Holder(void* unused) {
  (void)unused;
  if (syscall(SYS_unshare, holder_flags) != 0) syscall(SYS_exit, 5);
  __atomic_store_n(&holder_ready, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &holder_ready, 1 /* FUTEX_WAKE */, 1, NULL, NULL, 0);
  for (;;) pause();
  return 0;
}

// The vfork child: joins the holder's namespaces and clones init as our
// child, into new ones of the kinds the holder did not make.
static int Joiner(void* unused) {
  (void)unused;
  if (setns(user_fd, CLONE_NEWUSER) != 0 || setns(net_fd, CLONE_NEWNET) != 0) _exit(6);
  if (mnt_fd >= 0 && (setns(mnt_fd, CLONE_NEWNS) != 0 || setns(ipc_fd, CLONE_NEWIPC) != 0 ||
                      setns(uts_fd, CLONE_NEWUTS) != 0))
    _exit(6);
  struct clone_args args = {.flags = CLONE_PARENT | CLONE_NEWPID};
  if (mnt_fd < 0) args.flags |= CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
  const long init = syscall(SYS_clone3, &args, sizeof args);
  if (init == 0) Init();
  joined_init = init;
  _exit(init < 0 ? 7 : 0);
}

static int OpenNs(pid_t holder, const char* ns) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)holder, ns);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die(path);
  return fd;
}

// five: the holder makes the mount, ipc and uts namespaces too.
static double Ahead(double work, int idle, int five) {
  double start = Now();
  holder_ready = 0;
  holder_flags = CLONE_NEWNET | (five ? CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS : 0);
  const pid_t holder = clone(Holder, holder_stack + sizeof holder_stack, CLONE_VM | CLONE_NEWUSER | SIGCHLD, NULL);
  if (holder < 0) Die("clone holder");
  MapIds(holder);
  if (idle) {
    nanosleep(&kBetweenJobs, NULL);
    start = Now();
  }
  Busy(work);
  // Waits a millisecond at a time: a holder that failed exits without a wake.
  const struct timespec tick = {0, 1000000};
  while (!__atomic_load_n(&holder_ready, __ATOMIC_SEQ_CST)) {
    int status = 0;
    if (waitpid(holder, &status, WNOHANG) == holder) {
      fprintf(stderr, "netns_ahead: the holder could not unshare its namespaces\n");
      exit(1);
    }
    syscall(SYS_futex, &holder_ready, 0 /* FUTEX_WAIT */, 0, &tick, NULL, 0);
  }
  user_fd = OpenNs(holder, "user");
  net_fd = OpenNs(holder, "net");
  mnt_fd = five ? OpenNs(holder, "mnt") : -1;
  ipc_fd = five ? OpenNs(holder, "ipc") : -1;
  uts_fd = five ? OpenNs(holder, "uts") : -1;
  kill(holder, SIGKILL);
  joined_init = -1;
  const pid_t joiner = clone(Joiner, joiner_stack + sizeof joiner_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
  int status = 0;
  if (joiner < 0 || waitpid(joiner, &status, 0) != joiner || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "netns_ahead: joining the holder's namespaces failed (status %d)\n", status);
    exit(1);
  }
  close(user_fd);
  close(net_fd);
  if (five) {  // -1 again: the next `ahead` round's joiner tells the ways apart by mnt_fd
    close(mnt_fd);
    close(ipc_fd);
    close(uts_fd);
    mnt_fd = ipc_fd = uts_fd = -1;
  }
  waitpid(holder, NULL, 0);
  ReapInit((pid_t)joined_init);
  return Now() - start;
}

static int Less(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double Median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, Less);
  return v[n / 2];
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (argc > 2 || rounds < 1 || rounds > kMaxRounds) {
    fprintf(stderr, "usage: netns_ahead [ROUNDS (1-%d)]\n", kMaxRounds);
    return 64;
  }
  NsLink("self", "user", own_user, sizeof own_user);
  NsLink("self", "net", own_net, sizeof own_net);
  NsLink("self", "mnt", own_mnt, sizeof own_mnt);
  static double one[kMaxRounds], ahead[kMaxRounds], five[kMaxRounds];
  printf("%d rounds each, in turns; medians in ms, from the start to init reaped\n", rounds);
  printf("%-10s %10s %10s %16s %10s %15s\n", "work (ms)", "one clone", "ahead", "ahead/one clone", "five",
         "five/one clone");
  // Rows: 0, 0.5 and 1 ms of work, then idle (no work, made between jobs).
  for (int row = 0; row < 4; row++) {
    const int idle = row == 3;
    const double work = idle ? 0 : row * 500.0;
    for (int i = 0; i < rounds; i++) {
      one[i] = OneClone(work, idle);
      ahead[i] = Ahead(work, idle, 0);
      five[i] = Ahead(work, idle, 1);
    }
    const double m_one = Median(one, rounds), m_ahead = Median(ahead, rounds), m_five = Median(five, rounds);
    char label[16];
    if (idle) {
      snprintf(label, sizeof label, "idle");
    } else {
      snprintf(label, sizeof label, "%.1f", work / 1000);
    }
    printf("%-10s %10.3f %10.3f %15.2fx %10.3f %14.2fx\n", label, m_one / 1000, m_ahead / 1000, m_ahead / m_one,
           m_five / 1000, m_five / m_one);
  }
  return 0;
}
