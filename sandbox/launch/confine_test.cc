// Real confinement on this kernel: each test confines a forked child with
// ConfineSelf (irreversible, so never the test process itself), makes one
// call there, and asserts its exact errno or signal next to a positive
// control: the same kind of call where the policy grants it. Every test runs
// with the confined side as root and as uid 65534.
#include "sandbox/launch/enforce.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "sandbox/testing/confined.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::TempTree;

constexpr uid_t kNobody = 65534;

// What the confined call gave: its errno (0 for success), or the signal that
// killed the child, or a setup failure.
struct Outcome {
  int err = -1;
  int signal = 0;
  std::string setup_error;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{errno " << o.err << " (" << (o.err > 0 ? strerrorname_np(o.err) : "-") << "), signal " << o.signal
            << ", setup '" << o.setup_error << "'}";
}

// Returns 0 or the errno of a call that returns -1 on failure.
int Errno(long ret) { return ret == -1 ? errno : 0; }

class ConfineTest : public testing::ConfinedTest {
 protected:
  Outcome RunConfined(const Policy& policy, const std::function<int()>& call, const LaunchOptions& options = {}) {
    const auto c = Confined(policy, call, options);
    return {c.value, c.signal, c.setup_error};
  }

  static Outcome Err(int err) { return {err, 0, ""}; }
};

bool operator==(const Outcome& a, const Outcome& b) {
  return a.err == b.err && a.signal == b.signal && a.setup_error == b.setup_error;
}

int OpenErr(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

// Forks and execs argv; the errno of execve, or 0 once the program ran.
int ExecErr(const std::vector<std::string>& args) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    const int err = errno;
    (void)!write(pipefd[1], &err, sizeof err);
    _exit(127);
  }
  close(pipefd[1]);
  int err = 0;
  if (read(pipefd[0], &err, sizeof err) != sizeof err) err = 0;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return err;
}

TEST_P(ConfineTest, ReadOutsideTheGrantsIsRefused) {
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return OpenErr(tree_.Path("outside/secret"), O_RDONLY); }), Err(EACCES));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return OpenErr(tree_.Path("bundle/file"), O_RDONLY); }), Err(0));
}

// Root owns /etc/shadow, so file permissions alone would let a root module
// read it: root sees /etc through the idmapped view (or the narrowed grant).
TEST_P(ConfineTest, RootOnlyFilesInEtcStayUnreadable) {
  struct stat st {};
  if (stat("/etc/shadow", &st) != 0 || (st.st_mode & S_IROTH) || st.st_uid != 0)
    GTEST_SKIP() << "no root-owned, not world-readable /etc/shadow on this host";
  for (bool exec_writable : {true, false}) {
    const Policy policy = tree_.Runner(exec_writable ? R"("exec_writable": true)" : "");
    EXPECT_EQ(RunConfined(policy, [&] { return OpenErr("/etc/shadow", O_RDONLY); }), Err(EACCES)) << exec_writable;
    EXPECT_EQ(RunConfined(policy, [&] { return OpenErr("/etc/passwd", O_RDONLY); }), Err(0)) << exec_writable;
  }
}

// Outside the writable grants every mount is read-only (EROFS); Landlock
// refuses the same behind it (harness/test_conform.py drops each layer).
TEST_P(ConfineTest, WritingIntoTheBundleIsRefused) {
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return OpenErr(tree_.Path("bundle/new"), O_WRONLY | O_CREAT); }),
            Err(EROFS));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return OpenErr(tree_.Path("work/new"), O_WRONLY | O_CREAT); }), Err(0));
  EXPECT_FALSE(std::filesystem::exists(tree_.Path("bundle/new")));  // seen from outside
}

TEST_P(ConfineTest, TruncatingOutsideTheWritableGrantsIsRefused) {
  tree_.Write("outside/victim", "keep me\n", 0666);
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(truncate(tree_.Path("outside/victim").c_str(), 0)); }),
            Err(EROFS));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(truncate(tree_.Path("work/file").c_str(), 0)); }), Err(0));
  EXPECT_EQ(std::filesystem::file_size(tree_.Path("outside/victim")), 8u);
}

// Landlock has no hook on getxattr either: by path, extended attributes are
// read nowhere (EOPNOTSUPP, which tools take for "none here"); through an
// fd the cage let the module open they stay readable.
TEST_P(ConfineTest, ExtendedAttributesAreReadByFdOnly) {
  tree_.Write("work/mine", "mine\n", 0666);
  for (const char* name : {"outside/secret", "work/mine"})
    if (setxattr(tree_.Path(name).c_str(), "user.oarbank_test", "42", 2, 0) != 0)
      GTEST_SKIP() << "no user.* extended attributes here: " << strerror(errno);
  char value[8];
  const std::string secret = tree_.Path("outside/secret"), mine = tree_.Path("work/mine");
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(getxattr(secret.c_str(), "user.oarbank_test", value, 8)); }),
            Err(EOPNOTSUPP));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(listxattr(secret.c_str(), value, 8)); }), Err(EOPNOTSUPP));
  // getxattrat (Linux 6.13, x86_64 464), newer than the libseccomp built
  // against: the filter has it by number (seccomp answers before the
  // syscall table, so older kernels give the same answer).
  struct {
    uint64_t value;
    uint32_t size, flags;
  } args{reinterpret_cast<uintptr_t>(value), sizeof value, 0};
  EXPECT_EQ(
      RunConfined(
          tree_.Runner(),
          [&] { return Errno(syscall(464, AT_FDCWD, secret.c_str(), 0, "user.oarbank_test", &args, sizeof args)); }),
      Err(EOPNOTSUPP));
  // By path even in the grant; by fd there, yes.
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(getxattr(mine.c_str(), "user.oarbank_test", value, 8)); }),
            Err(EOPNOTSUPP));
  EXPECT_EQ(RunConfined(tree_.Runner(),
                        [&] {
                          const int fd = open(mine.c_str(), O_RDONLY | O_CLOEXEC);
                          if (fd < 0) return errno;
                          const ssize_t n = fgetxattr(fd, "user.oarbank_test", value, sizeof value);
                          const int err = n == 2 && memcmp(value, "42", 2) == 0 ? 0 : n < 0 ? errno : EIO;
                          close(fd);
                          return err;
                        }),
            Err(0));
}

// Landlock has no hook on a file's mode, owner, times or extended
// attributes: the read-only mounts refuse them outside the writable grants,
// whether or not the grants are noexec. A file of the module's own uid, so
// file permissions cannot be what refuses.
TEST_P(ConfineTest, MetadataOutsideTheWritableGrantsIsRefused) {
  for (const char* name : {"outside/victim", "work/mine"}) {
    tree_.Write(name, "keep me\n", 0600);
    ASSERT_EQ(chown(tree_.Path(name).c_str(), GetParam(), GetParam()), 0) << strerror(errno);
  }
  auto metadata = [](const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return Errno(-1);
    if (chmod(path.c_str(), 0644) != 0) return Errno(-1);
    if (chown(path.c_str(), st.st_uid, st.st_gid) != 0) return Errno(-1);
    const timespec times[2] = {{1, 0}, {1, 0}};
    if (utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) return Errno(-1);
    if (setxattr(path.c_str(), "user.oarbank_test", "1", 1, 0) != 0 && errno != EOPNOTSUPP) return Errno(-1);
    return Errno(0);
  };
  for (bool exec_writable : {true, false}) {
    const Policy policy = tree_.Runner(exec_writable ? R"("exec_writable": true)" : "");
    EXPECT_EQ(RunConfined(policy, [&] { return metadata(tree_.Path("outside/victim")); }), Err(EROFS)) << exec_writable;
    // Positive control: the same calls in a writable grant.
    EXPECT_EQ(RunConfined(policy, [&] { return metadata(tree_.Path("work/mine")); }), Err(0)) << exec_writable;
    // And each alone, outside (one refused call must not hide another).
    const std::string victim = tree_.Path("outside/victim");
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(chmod(victim.c_str(), 0644)); }), Err(EROFS));
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(chown(victim.c_str(), GetParam(), GetParam())); }), Err(EROFS));
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(utimensat(AT_FDCWD, victim.c_str(), nullptr, 0)); }), Err(EROFS));
  }
  struct stat st {};
  ASSERT_EQ(stat(tree_.Path("outside/victim").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);  // seen from outside
  EXPECT_NE(st.st_mtim.tv_sec, 1);
}

TEST_P(ConfineTest, ExecutingAWrittenFileIsRefused) {
  std::filesystem::copy_file("/bin/true", tree_.Path("work/written"));
  chmod(tree_.Path("work/written").c_str(), 0755);
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return ExecErr({tree_.Path("work/written")}); }), Err(EACCES));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return ExecErr({"/bin/true"}); }), Err(0));
  EXPECT_EQ(
      RunConfined(tree_.Runner(R"("exec_writable": true)"), [&] { return ExecErr({tree_.Path("work/written")}); }),
      Err(0));
}

// What the dynamic loader does with `ld.so ./written`: map the file
// executable. Landlock allows it (the file is readable); the noexec bind of
// the writable grant refuses it.
TEST_P(ConfineTest, MappingAWrittenFileExecutableIsRefused) {
  std::filesystem::copy_file("/bin/true", tree_.Path("work/written"));
  auto map_exec = [](const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    const int err = p == MAP_FAILED ? errno : 0;
    close(fd);
    return err;
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return map_exec(tree_.Path("work/written")); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return map_exec("/bin/true"); }), Err(0));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return ExecErr({"/lib64/ld-linux-x86-64.so.2", "/bin/true"}); }), Err(0));
}

TEST_P(ConfineTest, MemfdAndExecveatEmptyPathAreRefused) {
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(memfd_create("x", MFD_CLOEXEC)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(R"("exec_writable": true)"), [] { return Errno(memfd_create("x", MFD_CLOEXEC)); }),
            Err(0));
  auto execveat_empty = [] {
    const int fd = open("/bin/true", O_RDONLY | O_CLOEXEC);
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    syscall(SYS_execveat, fd, "", argv, environ, AT_EMPTY_PATH);
    return errno;
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), execveat_empty), Err(EPERM));
}

TEST_P(ConfineTest, UnixSocketsAreRefusedButSocketpairWorks) {
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(socket(AF_UNIX, SOCK_STREAM, 0)); }), Err(EPERM));
  int sv[2];
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socketpair(AF_UNIX, SOCK_STREAM, 0, sv)); }), Err(0));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv)); }), Err(0));
  // A datagram pair can sendto() or connect() any address: refused like
  // socket(AF_UNIX), whatever flags ride on the type, and as SOCK_RAW
  // (which the unix family turns into SOCK_DGRAM).
  for (int type : {int{SOCK_DGRAM}, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, int{SOCK_RAW}})
    EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socketpair(AF_UNIX, type, 0, sv)); }), Err(EPERM));
  // Another family's pair (TIPC's, the only other one) is refused before the
  // kernel could load a module for it.
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socketpair(AF_TIPC, SOCK_SEQPACKET, 0, sv)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socketpair(AF_INET, SOCK_STREAM, 0, sv)); }), Err(EPERM));
}

// Between reading the policy and confining, a process that shares a grant
// (another job's module, a daemon it left) can swap a grant for a symlink to
// somewhere else: the launch must refuse, never move the rule or the noexec
// bind there. The swap here is the race won.
TEST_P(ConfineTest, AGrantSwappedForASymlinkSinceTheParseRefusesTheLaunch) {
  for (const char* exec_writable : {"true", "false"}) {
    TempTree tree;
    const Policy policy = tree.Runner(std::string(R"("exec_writable": )") + exec_writable);  // tmp resolved here
    std::filesystem::rename(tree.Path("work/tmp"), tree.Path("work/tmp.real"));
    std::filesystem::create_directory_symlink(tree.Path("outside"), tree.Path("work/tmp"));
    chmod(tree.Path("work").c_str(), 0777);
    const Outcome out = RunConfined(policy, [&] { return Errno(open(tree.Path("outside/secret").c_str(), O_RDONLY)); });
    EXPECT_NE(out.setup_error.find("a symlink is in it now"), std::string::npos) << exec_writable << ": " << out;
    // The same policy with the grant back in place launches.
    std::filesystem::remove(tree.Path("work/tmp"));
    std::filesystem::rename(tree.Path("work/tmp.real"), tree.Path("work/tmp"));
    EXPECT_EQ(RunConfined(policy, [&] { return Errno(open(tree.Path("outside/secret").c_str(), O_RDONLY)); }),
              Err(EACCES))
        << exec_writable;
  }
}

// A user-notification listener is refused however the operation is spelt
// (the kernel reads it as 32 bits); a plain filter stays allowed. A NULL
// program makes an allowed call fail with EFAULT before installing anything.
TEST_P(ConfineTest, SeccompListenerIsRefusedOnTheOperationsLow32Bits) {
  constexpr unsigned long kSetModeFilter = 1, kNewListener = 1ul << 3;
  for (unsigned long op : {kSetModeFilter, (1ul << 32) | kSetModeFilter})
    EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(syscall(SYS_seccomp, op, kNewListener, nullptr)); }),
              Err(EPERM))
        << std::hex << op;
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(syscall(SYS_seccomp, kSetModeFilter, 0, nullptr)); }),
            Err(EFAULT));
}

TEST_P(ConfineTest, NetNoneRefusesIpSockets) {
  const std::string egress = R"("net": {"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 3128})";
  for (int family : {AF_INET, AF_INET6}) {
    EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(socket(family, SOCK_STREAM, 0)); }), Err(EPERM));
    EXPECT_EQ(RunConfined(tree_.Runner(egress), [&] { return Errno(socket(family, SOCK_STREAM, 0)); }), Err(0));
    EXPECT_EQ(RunConfined(tree_.Runner(egress), [&] { return Errno(socket(family, SOCK_DGRAM, 0)); }), Err(EPERM));
  }
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(socket(AF_NETLINK, SOCK_RAW, 0)); }), Err(EPERM));
}

TEST_P(ConfineTest, ListenAndBindAreRefused) {
  // Unconfined, listen/bind on fd -1 answer EBADF; the filter answers first.
  EXPECT_EQ(Errno(listen(-1, 1)), EBADF);
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(listen(-1, 1)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(bind(-1, nullptr, 0)); }), Err(EPERM));
}

TEST_P(ConfineTest, PtraceAndNamespacesAreRefused) {
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(unshare(CLONE_NEWUSER)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(unshare(CLONE_NEWNET)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_clone3, nullptr, 0)); }), Err(ENOSYS));
  // Positive control: the child still runs ordinary syscalls.
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return getppid() > 0 ? 0 : 1; }), Err(0));
}

TEST_P(ConfineTest, MountsAreRefusedOldAndNewApi) {
  EXPECT_EQ(Errno(mount(nullptr, nullptr, nullptr, 0, reinterpret_cast<void*>(1))), EFAULT);  // reaches the kernel
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(mount("none", "/tmp", "tmpfs", 0, nullptr)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_fsopen, "tmpfs", 0)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_open_tree, AT_FDCWD, "/", 0)); }), Err(EPERM));
}

TEST_P(ConfineTest, KernelSurfaceIsRefused) {
  EXPECT_EQ(Errno(syscall(SYS_bpf, 0, nullptr, 64)), EFAULT);  // reaches the kernel unconfined
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_bpf, 0, nullptr, 64)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(),
                        [] { return Errno(syscall(SYS_add_key, "user", "k", "v", 1, KEY_SPEC_PROCESS_KEYRING)); }),
            Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_io_uring_setup, 4, nullptr)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_userfaultfd, 0)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0)); }),
            Err(EPERM));
}

TEST_P(ConfineTest, TerminalInjectionIsRefusedWhateverTheUpperBits) {
  auto tiocsti = [](unsigned long request) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const long ret = syscall(SYS_ioctl, fd, request, "x");
    const int err = ret == -1 ? errno : 0;
    close(fd);
    return err;
  };
  EXPECT_EQ(tiocsti(TIOCSTI), ENOTTY);  // unfiltered: the tty layer answers
  for (unsigned long req : {static_cast<unsigned long>(TIOCSTI), TIOCSTI | (1ul << 32),
                            static_cast<unsigned long>(TIOCLINUX), TIOCLINUX | (1ul << 40)})
    EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return tiocsti(req); }), Err(EPERM)) << std::hex << req;
}

TEST_P(ConfineTest, SignalsDoNotLeaveTheSandbox) {
  const pid_t outside = getpid();  // the test process: outside the child's Landlock domain
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return Errno(kill(outside, 0)); }), Err(EPERM));
  EXPECT_EQ(RunConfined(tree_.Runner(), [] { return Errno(kill(getpid(), 0)); }), Err(0));
}

TEST_P(ConfineTest, NothingIsLeftPrivileged) {
  auto status_line = [](const char* key) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) return line;
    return std::string();
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return status_line("NoNewPrivs:") == "NoNewPrivs:\t1" ? 0 : 1; }),
            Err(0));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return status_line("Seccomp:") == "Seccomp:\t2" ? 0 : 1; }), Err(0));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return status_line("CapEff:") == "CapEff:\t0000000000000000" ? 0 : 1; }),
            Err(0));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return status_line("CapBnd:") == "CapBnd:\t0000000000000000" ? 0 : 1; }),
            Err(0));
}

TEST_P(ConfineTest, NoCoreDumpAndNoDeviceNode) {
  // RLIMIT_CORE is 0/0 and stays there (EPERM: CAP_SYS_RESOURCE is gone).
  auto raise_core_limit = [] {
    rlimit now{};
    if (getrlimit(RLIMIT_CORE, &now) != 0 || now.rlim_cur != 0 || now.rlim_max != 0) return -1;
    const rlimit up{1 << 20, 1 << 20};
    return setrlimit(RLIMIT_CORE, &up) == 0 ? 0 : errno;
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), raise_core_limit), Err(EPERM));
  // A device node in a writable grant: Landlock refuses it (no MAKE_CHAR or
  // MAKE_BLOCK there) before the capability check; a FIFO is still made.
  auto make = [&](const char* name, mode_t mode, dev_t dev) {
    return mknod(tree_.Path(std::string("work/") + name).c_str(), mode | 0600, dev) == 0 ? 0 : errno;
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return make("null", S_IFCHR, makedev(1, 3)); }), Err(EACCES));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return make("loop", S_IFBLK, makedev(7, 0)); }), Err(EACCES));
  EXPECT_EQ(RunConfined(tree_.Runner(), [&] { return make("fifo", S_IFIFO, 0); }), Err(0));
  EXPECT_FALSE(std::filesystem::exists(tree_.Path("work/null")));  // seen from outside
}

TEST_P(ConfineTest, InheritedFdsAreClosedAcrossExec) {
  const int leaked = open(tree_.Path("outside/secret").c_str(), O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leaked, 0);
  auto fd_open_after_exec = [&] {
    // /bin/sh -c 'test -e /proc/self/fd/N' runs after the cage's exec step.
    const std::string script =
        "exec 2>/dev/null; [ -e /proc/self/fd/" + std::to_string(leaked) + " ] && exit 3; exit 0";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  };
  EXPECT_EQ(RunConfined(tree_.Runner(), fd_open_after_exec), Err(0));
  EXPECT_EQ(fd_open_after_exec(), 3);  // positive control: unconfined, the fd is inherited
  close(leaked);
}

// Below Landlock ABI 9 a broker grant is one inherited connection: it stays
// open across exec and carries bytes, socket(AF_UNIX) stays refused, every
// other inherited fd is close-on-exec, and a plan with a broker refuses to
// run without its connection.
TEST_P(ConfineTest, TheInheritedBrokerConnectionIsTheOnlyUnixSocket) {
  if (host_.landlock_abi >= 9) GTEST_SKIP() << "from Landlock ABI 9 the broker is reached by path (plan_test)";
  const Policy policy = tree_.Runner("\"broker\": \"" + tree_.MakeSocket("broker.sock") + "\"");
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  const int other = open("/dev/null", O_RDONLY);  // inherited without close-on-exec
  ASSERT_GE(other, 0);
  const LaunchOptions with_broker{.broker_fd = sv[1]};
  EXPECT_EQ(RunConfined(
                policy,
                [&] {
                  if (fcntl(sv[1], F_GETFD) & FD_CLOEXEC) return -2;
                  return write(sv[1], "x", 1) == 1 ? 0 : errno;
                },
                with_broker),
            Err(0));
  char got = 0;
  EXPECT_EQ(recv(sv[0], &got, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(got, 'x');
  EXPECT_EQ(RunConfined(
                policy, [] { return Errno(socket(AF_UNIX, SOCK_STREAM, 0)); }, with_broker),
            Err(EPERM));
  EXPECT_EQ(RunConfined(
                policy, [&] { return (fcntl(other, F_GETFD) & FD_CLOEXEC) ? 0 : -3; }, with_broker),
            Err(0));
  const Outcome without = RunConfined(policy, [] { return 0; });
  EXPECT_NE(without.setup_error.find("broker connection"), std::string::npos) << without;
  close(other);
  close(sv[0]);
  close(sv[1]);
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, ConfineTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});

}  // namespace
}  // namespace oarbank
