#include "harness/world.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "sandbox/host/host_facts.h"

namespace oarbank {
namespace fs = std::filesystem;
namespace {

constexpr int kInheritedFd = 7;
// Above FD_SETSIZE: a launcher that closes fds by looping to 1024, or to a
// limit it read, would miss it.
constexpr int kInheritedHighFd = 1500;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every path below `prefix` (opened as `fd`, which this closes) with its
// size, so a truncation shows as well as a new file. Directories are not
// followed through symlinks; a symlink's size is its target's.
void ListTreeInto(int fd, const std::string& prefix, std::set<std::string>& names) {
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return;
  }
  while (const dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    const std::string path = prefix + "/" + e->d_name;
    struct stat st {};
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN && fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      is_dir = S_ISDIR(st.st_mode);
    long long size = 0;
    if (!is_dir && fstatat(dirfd(dir), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode)) size = st.st_size;
    names.insert(path + " (" + std::to_string(size) + " bytes)");
    if (!is_dir) continue;
    const int child = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child >= 0) ListTreeInto(child, path, names);
  }
  closedir(dir);
}

std::set<std::string> ListTree(const std::string& dir) {
  std::set<std::string> names;
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) ListTreeInto(fd, dir, names);
  return names;
}

pid_t StartOutsideProcess(uid_t uid) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  if (uid != 0 && (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0))
    _exit(1);
  prctl(PR_SET_DUMPABLE, 1);  // like any process of that user after exec
  for (;;) pause();
}

// Like an outside process, but with every signal blocked from its first
// instruction (the mask is set in this thread around the fork) and no session
// of the harness's: nothing it is sent is ever consumed, or kills it.
pid_t StartSignalSink(uid_t uid) {
  const pid_t parent = getpid();
  int ready[2];  // the sink says when it runs as uid; EOF: it gave up
  if (pipe2(ready, O_CLOEXEC) != 0) return -1;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid != 0) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(ready[1]);
    char c = 0;
    ssize_t n = -1;
    if (pid > 0) do
        n = read(ready[0], &c, 1);
      while (n < 0 && errno == EINTR);
    close(ready[0]);
    if (pid > 0 && n != 1) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return -1;
    }
    return pid;
  }
  // Forked from a worker thread, it would hold the other workers' pipe ends
  // (Spawn's, between pipe2 and close) and keep them from seeing EOF: only
  // its ready pipe stays, as fd 3.
  if (dup2(ready[1], 3) != 3) _exit(1);
  syscall(SYS_close_range, 4, ~0u, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  setsid();
  // Raw system calls: the child must not take glibc's setxid locks, which
  // another thread may have held at the fork.
  if (uid != 0 && (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, uid, uid, uid) != 0 ||
                   syscall(SYS_setresuid, uid, uid, uid) != 0))
    _exit(1);
  prctl(PR_SET_DUMPABLE, 1);
  if (write(3, "r", 1) != 1) _exit(1);
  close(3);
  for (;;) pause();
}

}  // namespace

// Only pids this set started (always > 0) are ever signalled: kill(-1)
// would reach every process the harness may signal.
SignalSinks::~SignalSinks() {
  for (const auto& [uid, pid] : pids_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

pid_t SignalSinks::For(uid_t uid) {
  if (auto it = pids_.find(uid); it != pids_.end()) return it->second;
  const pid_t pid = StartSignalSink(uid);
  if (pid > 0) pids_.emplace(uid, pid);
  return pid > 0 ? pid : -1;
}

Expected<uint64_t> SignalSinks::TakePending(uid_t uid) {
  auto it = pids_.find(uid);
  if (it == pids_.end()) return Error{"signal sink", "none was started for uid " + std::to_string(uid)};
  const pid_t pid = it->second;
  // A sink that died (or never dropped to uid) would make any run look
  // blocked: it must be alive, of uid, and still blocking what it is sent.
  uint64_t pending = 0, blocked = 0;
  std::string state, uids;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)  // thread, process (SIGIO)
      pending |= std::stoull(line.substr(7), nullptr, 16);
    else if (line.rfind("SigBlk:", 0) == 0)
      blocked = std::stoull(line.substr(7), nullptr, 16);
    else if (line.rfind("State:", 0) == 0)
      state = line.substr(6);
    else if (line.rfind("Uid:", 0) == 0)
      uids = line.substr(4);
  }
  // Signals 1-31 (glibc keeps 32 and 33 for itself, and SIGKILL and SIGSTOP
  // cannot be blocked).
  const uint64_t must_block = ((1ull << 31) - 1) & ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
  const bool alive = waitpid(pid, nullptr, WNOHANG) == 0 && !state.empty() && state.find('Z') == std::string::npos;
  std::istringstream ids(uids);
  uid_t real = 0, effective = 0;
  ids >> real >> effective;
  if (!alive || real != uid || effective != uid || (blocked & must_block) != must_block) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pids_.erase(it);
    return Error{"signal sink", "pid " + std::to_string(pid) + " was not a live process of uid " + std::to_string(uid) +
                                    " blocking every signal (State:" + state + ")"};
  }
  if (pending != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pids_.erase(it);
  }
  return pending;
}

Listeners::Listeners() = default;

Listeners::~Listeners() {
  for (const auto& s : sockets_) close(s.fd);
}

bool Listeners::AddUnix(const std::string& name, const std::string& path, int type) {
  const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
  if (type == SOCK_STREAM && listen(fd, 64) != 0) return false;
  chmod(path.c_str(), 0777);
  sockets_.push_back({fd, name, type == SOCK_STREAM});
  return true;
}

bool Listeners::AddAbstract(const std::string& name, const std::string& abstract) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path + 1, abstract.data(), abstract.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract.size());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 64) != 0) return false;
  sockets_.push_back({fd, name, true});
  return true;
}

bool ParseSocketAddress(const std::string& address, int port, sockaddr_storage& out, socklen_t& len) {
  out = {};
  if (address.find(':') == std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in*>(&out);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *a;
    return inet_pton(AF_INET, address.c_str(), &a->sin_addr) == 1;
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&out);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(static_cast<uint16_t>(port));
  len = sizeof *a;
  return inet_pton(AF_INET6, address.c_str(), &a->sin6_addr) == 1;
}

int Listeners::AddAt(const std::string& name, const std::string& address, int port, int type) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!ParseSocketAddress(address, port, ss, len)) {
    errno = EINVAL;
    return -1;
  }
  const int fd = socket(ss.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || (type == SOCK_STREAM && listen(fd, 64) != 0) ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  sockets_.push_back({fd, name, type == SOCK_STREAM});
  // sin_port and sin6_port sit at the same offset.
  return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

int Listeners::AddTcp(const std::string& name, int port) {
  port = AddAt(name, "127.0.0.1", port, SOCK_STREAM);
  if (port >= 0) (void)AddAt(name, "::1", port, SOCK_STREAM);  // a host without IPv6 loopback keeps the IPv4 one
  return port;
}

int Listeners::AddUdp(const std::string& name) { return AddAt(name, "127.0.0.1", 0, SOCK_DGRAM); }

std::vector<std::string> Listeners::Take(const std::string& probe) {
  auto first_line = [](const char* buf, ssize_t n) {
    std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return text.substr(0, text.find('\n'));
  };
  std::lock_guard<std::mutex> lock(mutex_);
  char buf[256];
  for (const auto& s : sockets_) {
    // The granted broker endpoint: the launcher connects there itself below
    // Landlock ABI 9 (an inherited connection), so an arrival is no escape.
    if (s.name == "broker") {
      for (int c; (c = accept4(s.fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) close(c);
      continue;
    }
    if (s.stream) {
      for (int c; (c = accept4(s.fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
        pollfd p = {c, POLLIN, 0};
        const ssize_t n = poll(&p, 1, 20) == 1 ? recv(c, buf, sizeof buf, MSG_DONTWAIT) : 0;
        pending_.push_back({s.name, first_line(buf, n)});
        close(c);
      }
    } else {
      for (ssize_t n; (n = recv(s.fd, buf, sizeof buf, MSG_DONTWAIT)) >= 0;)
        pending_.push_back({s.name, first_line(buf, n)});
    }
  }
  std::vector<std::string> taken;
  std::erase_if(pending_, [&](const Arrival& a) {
    if (!a.said.empty() && a.said != probe) return false;
    taken.push_back(a.listener + ": " + a.said);
    return true;
  });
  return taken;
}

World::~World() {
  listeners.reset();
  net.reset();
  if (sysv_msg_id >= 0) msgctl(sysv_msg_id, IPC_RMID, nullptr);
  if (!mqueue_name.empty()) mq_unlink(mqueue_name.c_str());
  if (!host_shm_file.empty()) unlink(host_shm_file.c_str());
  if (host_pty_master >= 0) close(host_pty_master);
  for (const auto& [uid, pid] : outside_pid) {
    if (pid <= 0) continue;  // never kill(-1) or kill(0)
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (inherited_fd >= 0) close(inherited_fd);
  if (inherited_high_fd >= 0) close(inherited_high_fd);
  if (!cgroup_dir.empty()) rmdir(cgroup_dir.c_str());
  // The stand-in's tmpfs lives in this process's private mount namespace
  // and goes with it. An empty /dev/dri this run created stays: removing it
  // would unmount the stand-in of a battery running beside this one (rmdir
  // of a mount point detaches it in every namespace).
  // The tmpfs goes with its contents; then its empty mount point on disk.
  std::error_code ec;
  if (root_is_tmpfs) umount2(root.c_str(), MNT_DETACH);
  if (!root.empty()) fs::remove_all(root, ec);
}

namespace {

// MakeWorld's stages, in order. Each fills its part of the world; what it
// cannot make is a note (the report says it) or, where no run could be
// judged without it, an Error.

// The battery's own mount namespace, made before any thread: the world on
// a tmpfs there (its ~2,500 runs create and remove files without a disk
// journal, and none of it outlives this process), and the GPU stand-in.
// Every run is spawned from here, so it sees the same world. Whether the
// namespace is private.
Expected<bool> MakeRoot(World& w) {
  const bool private_mounts =
      unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  if (!private_mounts) w.notes.push_back("private mount namespace: " + std::string(strerror(errno)));
  char tmpl[] = "/tmp/oarbank-conform-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Error{"world", std::string("mkdtemp: ") + strerror(errno)};
  w.root = tmpl;
  if (!private_mounts) {
    w.notes.push_back("world on disk: no private mount namespace for its tmpfs");
  } else if (mount("tmpfs", tmpl, "tmpfs", 0, "mode=0755") == 0) {
    w.root_is_tmpfs = true;
  } else {
    w.notes.push_back("world on disk: mount tmpfs: " + std::string(strerror(errno)));
  }
  chmod(w.root.c_str(), 0755);
  return private_mounts;
}

// The job's directories, the carve-out targets, the probes (with the
// setuid helper, root's) and the secret.
void MakeDirectories(World& w, const std::string& probe_dir) {
  w.bundle = w.root + "/bundle";
  w.runtime = w.root + "/runtime";
  w.work = w.root + "/work";
  w.data = w.root + "/data";
  w.outside = w.root + "/outside";
  // work/agent/state: runner_agent's state directory, a grant nested two
  // levels down (an agent CLI's own state inside the worktree it works on).
  for (const auto& d : {w.bundle, w.runtime, w.work, w.work + "/tmp", w.work + "/agent/state", w.data, w.data + "/tmp",
                        w.outside, w.root + "/secret", w.root + "/policies"}) {
    fs::create_directories(d);
    chmod(d.c_str(), 0755);
  }
  for (const auto& d :
       {w.work, w.work + "/tmp", w.work + "/agent", w.work + "/agent/state", w.data, w.data + "/tmp", w.outside})
    chmod(d.c_str(), 0777);
  // What a policy with read_only carves out of its writable grant (the
  // write_read_only_carve_out and rename_read_only_carve_out probes): a
  // directory with a file anyone may write, so only the carve-out refuses.
  for (const auto& grant : {w.work, w.data}) {
    fs::create_directories(grant + "/carved");
    chmod((grant + "/carved").c_str(), 0777);
    std::ofstream(grant + "/carved/victim") << "carved\n";
    chmod((grant + "/carved/victim").c_str(), 0666);
  }
  // The probes, read+execute for everyone; the setuid helper owned by root.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(probe_dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string dst = w.bundle + "/" + entry.path().filename().string();
    fs::copy_file(entry.path(), dst, fs::copy_options::overwrite_existing, ec);
    chmod(dst.c_str(), 0755);
  }
  // The helpers the probes exec (aarch32_getuid), read+execute, in bundle/helpers.
  fs::create_directories(w.bundle + "/helpers", ec);
  chmod((w.bundle + "/helpers").c_str(), 0755);
  for (const auto& entry : fs::directory_iterator(probe_dir + "/helpers", ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string dst = w.bundle + "/helpers/" + entry.path().filename().string();
    fs::copy_file(entry.path(), dst, fs::copy_options::overwrite_existing, ec);
    chmod(dst.c_str(), 0755);
  }
  const std::string helper = probe_dir + "/helpers/probe_capeff_helper";
  if (fs::exists(helper)) {
    w.setuid_helper = w.bundle + "/probe_capeff_helper.setuid";
    fs::copy_file(helper, w.setuid_helper, fs::copy_options::overwrite_existing, ec);
    if (chown(w.setuid_helper.c_str(), 0, 0) != 0 || chmod(w.setuid_helper.c_str(), 04755) != 0)
      w.notes.push_back("setuid helper: " + std::string(strerror(errno)));
  } else {
    w.notes.push_back("no probe_capeff_helper in " + probe_dir + "/helpers");
  }

  w.secret = w.root + "/secret/id_ed25519";
  std::ofstream(w.secret) << "-----BEGIN OPENSSH PRIVATE KEY----- (oarbank battery secret)\n";
  chmod(w.secret.c_str(), 0644);
  // An extended attribute on it, for xattr_read_outside_grants (a
  // filesystem without user.* attributes: the probe says unsupported).
  static constexpr char kSecretXattr[] = "oarbank-battery-secret-attribute";
  if (setxattr(w.secret.c_str(), "user.oarbank_secret", kSecretXattr, sizeof kSecretXattr - 1, 0) != 0 &&
      errno != EOPNOTSUPP)
    w.notes.push_back("secret's extended attribute: " + std::string(strerror(errno)));
}

// Host sockets, in the network world's up namespace where there is one.
std::optional<Error> MakeListeners(World& w, bool network, std::random_device& rd) {
  w.listeners = std::make_unique<Listeners>();
  // Without it the battery still runs; only egress-any is not proven.
  if (network && !w.root_is_tmpfs) {
    w.notes.push_back("network world: needs the world's tmpfs for its tun stand-in: egress-any is not proven here");
  } else if (network) {
    auto net = EnterNetworkWorld(*w.listeners, w.root);
    if (net.ok())
      w.net = std::move(net).value();
    else
      w.notes.push_back("network world: " + net.error().what + ": egress-any is not proven here");
  }
  w.unix_socket = w.root + "/secret/host.sock";
  w.broker_socket = w.root + "/broker.sock";
  // A host daemon's socket inside the work grant, as git's fsmonitor keeps
  // one in a worktree's .git (unix_pathname_work).
  w.unix_socket_work = w.work + "/host-daemon.sock";
  if (!w.listeners->AddUnix("unix-work", w.unix_socket_work))
    return Error{"world", "unix listener in work: " + std::string(strerror(errno))};
  // And in the tmp and data grants, where the job binds its own
  // (unix_pathname_scratch).
  w.unix_socket_tmp = w.work + "/tmp/host-daemon.sock";
  w.unix_socket_data = w.data + "/host-daemon.sock";
  if (!w.listeners->AddUnix("unix-tmp", w.unix_socket_tmp) || !w.listeners->AddUnix("unix-data", w.unix_socket_data))
    return Error{"world", "unix listener in tmp or data: " + std::string(strerror(errno))};
  w.abstract_name = "oarbank-battery-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 100000);
  if (!w.listeners->AddUnix("unix", w.unix_socket))
    return Error{"world", "unix listener: " + std::string(strerror(errno))};
  w.unix_dgram_socket = w.root + "/secret/host-dgram.sock";
  if (!w.listeners->AddUnix("unix-dgram", w.unix_dgram_socket, SOCK_DGRAM))
    return Error{"world", "unix datagram listener: " + std::string(strerror(errno))};
  if (!w.listeners->AddUnix("broker", w.broker_socket))
    return Error{"world", "broker listener: " + std::string(strerror(errno))};
  if (!w.listeners->AddAbstract("abstract", w.abstract_name))
    return Error{"world", "abstract listener: " + std::string(strerror(errno))};
  w.tcp_port = w.listeners->AddTcp("tcp", 0);
  w.proxy_port = w.listeners->AddTcp("proxy", 0);
  w.udp_port = w.listeners->AddUdp("udp");
  if (w.tcp_port < 0 || w.proxy_port < 0 || w.udp_port < 0)
    return Error{"world", "loopback listeners: " + std::string(strerror(errno))};
  // The proxy's port on another loopback address (tcp_proxy_port_other_address):
  // only a connection accepted there is that probe's escape.
  if (w.listeners->AddAt("proxy-other", "127.0.0.2", w.proxy_port, SOCK_STREAM) < 0)
    return Error{"world", "listener on 127.0.0.2: " + std::string(strerror(errno))};
  return std::nullopt;
}

// An fd the agent forgot to close, on the secret: a low one and one above
// select()'s 1024.
std::optional<Error> LeaveInheritedFds(World& w) {
  const int fd = open(w.secret.c_str(), O_RDONLY);
  if (fd < 0 || dup2(fd, kInheritedFd) < 0) return Error{"world", "inherited fd: " + std::string(strerror(errno))};
  w.inherited_fd = kInheritedFd;
  // The fd table must be allowed to reach it; the limit goes back after.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  rlimit raised = files;
  raised.rlim_cur = std::max<rlim_t>(files.rlim_cur, kInheritedHighFd + 1);
  const bool placed = raised.rlim_cur <= files.rlim_max && setrlimit(RLIMIT_NOFILE, &raised) == 0 &&
                      dup2(fd, kInheritedHighFd) == kInheritedHighFd;
  const int err = raised.rlim_cur > files.rlim_max ? EMFILE : errno;
  setrlimit(RLIMIT_NOFILE, &files);
  if (!placed) {
    if (fd != kInheritedFd) close(fd);
    return Error{"world", "inherited fd " + std::to_string(kInheritedHighFd) + ": " + std::string(strerror(err)) +
                              " (RLIMIT_NOFILE hard limit " + std::to_string(files.rlim_max) + ")"};
  }
  w.inherited_high_fd = kInheritedHighFd;
  if (fd != kInheritedFd) close(fd);
  return std::nullopt;
}

// IPC the host's processes share by key or name, not by path; the host's
// shared memory and ptys, which a job's own /dev/shm and devpts must not
// reach.
void MakeHostIpc(World& w) {
  w.sysv_msg_id = msgget(IPC_PRIVATE, IPC_CREAT | 0666);
  if (w.sysv_msg_id < 0) w.notes.push_back("System V message queue: " + std::string(strerror(errno)));
  w.mqueue_name = "/oarbank-battery-" + std::to_string(getpid());
  const mode_t old_mask = umask(0);
  mq_attr attr{};
  attr.mq_maxmsg = 8;
  attr.mq_msgsize = 64;
  const mqd_t mq = mq_open(w.mqueue_name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666, &attr);
  umask(old_mask);
  if (mq == static_cast<mqd_t>(-1)) {
    w.notes.push_back("POSIX message queue: " + std::string(strerror(errno)));
    w.mqueue_name.clear();
  } else {
    mq_close(mq);
  }

  w.host_shm_file = "/dev/shm/oarbank-battery-" + std::to_string(getpid());
  if (const int fd = open(w.host_shm_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
      fd >= 0) {
    (void)!write(fd, "host\n", 5);
    fchmod(fd, 0666);
    close(fd);
  } else {
    w.notes.push_back("host /dev/shm file: " + std::string(strerror(errno)));
    w.host_shm_file.clear();
  }
  w.host_pty_master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (w.host_pty_master >= 0 && grantpt(w.host_pty_master) == 0 && unlockpt(w.host_pty_master) == 0 &&
      ptsname(w.host_pty_master) != nullptr) {
    w.host_pty = ptsname(w.host_pty_master);
    chmod(w.host_pty.c_str(), 0666);  // only the cage may stop either identity
  } else {
    w.notes.push_back("host pty: " + std::string(strerror(errno)));
  }
}

// An outer cgroup a probe could move itself into, and a GPU node: the
// host's own, or a stand-in (a copy of /dev/null's device number) on a
// tmpfs over /dev/dri in the battery's private mount namespace, so the
// host's /dev is not touched.
void MakeCgroupAndGpu(World& w, bool private_mounts) {
  const HostFacts host = ProbeHost();
  if (host.cgroup.v2_mounted) {
    const std::string dir = host.cgroup.mount_point + "/oarbank-battery-" + std::to_string(getpid());
    if (mkdir(dir.c_str(), 0755) == 0) {
      w.cgroup_dir = dir;
      chmod((dir + "/cgroup.procs").c_str(), 0666);  // only the cage may stop either identity
    } else
      w.notes.push_back("outer cgroup " + dir + ": " + strerror(errno));
  } else {
    w.notes.push_back("no cgroup2 mounted: cgroup_escape has no target");
  }
  if (!host.gpu_nodes.empty()) {
    for (const auto& n : host.gpu_nodes)
      if (n != "/dev/dri") w.gpu_node = n;
  }
  if (w.gpu_node.empty()) {
    if (!private_mounts) {
      w.notes.push_back("GPU stand-in: no private mount namespace");
    } else {
      if (!fs::exists("/dev/dri") && mkdir("/dev/dri", 0755) == 0) w.created_dev_dri = "/dev/dri";
      if (mount("tmpfs", "/dev/dri", "tmpfs", MS_NOSUID, "mode=0755") == 0 &&
          mknod("/dev/dri/renderD128", S_IFCHR | 0666, makedev(1, 3)) == 0) {
        chmod("/dev/dri/renderD128", 0666);
        w.gpu_node = "/dev/dri/renderD128";
      } else {
        w.notes.push_back("GPU stand-in: " + std::string(strerror(errno)));
      }
    }
  }
}

}  // namespace

Expected<std::unique_ptr<World>> MakeWorld(const std::string& probe_dir, const std::vector<uid_t>& uids, bool network) {
  if (geteuid() != 0)
    return Error{"world", "needs root: it runs the confined side as uid 65534 and makes a setuid helper"};
  auto w = std::make_unique<World>();
  auto private_mounts = MakeRoot(*w);
  if (!private_mounts.ok()) return private_mounts.error();
  MakeDirectories(*w, probe_dir);
  std::random_device rd;
  if (auto e = MakeListeners(*w, network, rd)) return *e;
  for (uid_t uid : uids) {
    const pid_t pid = StartOutsideProcess(uid);
    if (pid < 0) return Error{"world", "outside process: fork: " + std::string(strerror(errno))};
    w->outside_pid[uid] = pid;
  }
  if (auto e = LeaveInheritedFds(*w)) return *e;
  w->env_secret = "oarbank-secret-" + std::to_string(rd());
  MakeHostIpc(*w);
  MakeCgroupAndGpu(*w, private_mounts.value());
  return w;
}

Expected<std::string> MaterializePolicy(const World& world, const std::string& fixture_path, const std::string& name) {
  std::string text = ReadAll(fixture_path);
  if (text.empty()) return Error{fixture_path, "cannot read the policy fixture"};
  auto replace = [&text](const std::string& from, const std::string& to) {
    for (size_t pos; (pos = text.find(from)) != std::string::npos;) text.replace(pos, from.size(), to);
  };
  replace("@ROOT@", world.root);
  replace("@PROXY_PORT@", std::to_string(world.proxy_port));
  const std::string path = world.root + "/policies/" + name + ".json";
  std::ofstream(path) << text;
  chmod(path.c_str(), 0644);
  return path;
}

Evidence ObserveWorld(World& world, const std::string& outside_dir, const std::string& probe, const Evidence* shared) {
  Evidence e;
  e.arrivals = world.listeners->Take(probe);
  e.bundle_files = shared ? shared->bundle_files : ListTree(world.bundle);
  e.secret_files = shared ? shared->secret_files : ListTree(world.root + "/secret");
  e.outside_files = ListTree(outside_dir);
  return e;
}

namespace {

// A file another probe names after itself ("<probe>.<pid>", as every probe
// names what it writes) in a directory all runs share: that probe's
// unconfined run, escaping on purpose in the other worker, not this run.
bool AnotherProbesFile(const std::string& entry, const std::string& probe) {
  const std::string path = entry.substr(0, entry.rfind(" ("));
  const std::string name = path.substr(path.rfind('/') + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return false;
  if (name.find_first_not_of("0123456789", dot + 1) != std::string::npos) return false;
  return name.compare(0, dot, probe) != 0;
}

}  // namespace

std::vector<std::string> CompareEvidence(const Evidence& before, const Evidence& after, const std::string& probe) {
  std::vector<std::string> out;
  for (const auto& arrival : after.arrivals)
    out.push_back("the host's " + arrival.substr(0, arrival.find(':')) + " listener got \"" +
                  arrival.substr(arrival.find(": ") + 2) + "\"");
  for (const auto& f : after.bundle_files)
    if (!before.bundle_files.count(f) && !AnotherProbesFile(f, probe)) out.push_back("new file in the bundle: " + f);
  for (const auto& f : after.secret_files)
    if (!before.secret_files.count(f) && !AnotherProbesFile(f, probe))
      out.push_back("changed outside the grants: " + f);
  for (const auto& f : after.outside_files)
    if (!before.outside_files.count(f)) out.push_back("changed outside the grants: " + f);
  return out;
}

}  // namespace oarbank
