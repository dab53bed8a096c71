#include "sandbox/broker/container_runtime.h"

#include "sandbox/broker/subid_ranges.h"
#include "sandbox/common/open_no_symlinks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace oarbank::broker {
namespace {

using Clock = std::chrono::steady_clock;

std::string FindOnPath(const std::string& path_env, const std::string& name) {
  std::stringstream in(path_env);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty() || dir.front() != '/') continue;  // never the current directory
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

// fork + execve with stdin /dev/null, the given stdout/stderr, nothing else.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int out_fd, int err_fd) {
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int in = open("/dev/null", O_RDONLY);
  if (in < 0 || dup2(in, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(127);
  syscall(SYS_close_range, 3u, ~0u, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  // Podman dies with the request's process (and so with the broker): no
  // client goes on creating a container nobody will remove.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

int WaitStatus(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Appends to `tail`, keeping its last kTailBytes.
void KeepTail(std::string& tail, const char* buf, size_t n) {
  tail.append(buf, n);
  if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
}

// A directory below `base` reached without following any symlink.
// openat2(RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV), or the
// equivalent walk where the kernel has no openat2 (common/open_no_symlinks.h).
int OpenBeneath(int base_fd, const std::string& rel, int flags) {
  return OpenNoSymlinksAt(base_fd, rel.c_str(), flags, /*no_xdev=*/true, /*beneath=*/true);
}

// <work>/.oarbank-broker/<name>.<stream>, created for the job (never an
// existing file, never through a symlink the module planted).
int CreateOutputFile(const BrokerConfig& config, const RuntimeConfig& rt, const std::string& file, std::string* error) {
  const int work = open(config.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (work < 0) {
    *error = config.work_dir + ": " + strerror(errno);
    return -1;
  }
  if (mkdirat(work, ".oarbank-broker", 0755) == 0) {
    const int d = OpenBeneath(work, ".oarbank-broker", O_RDONLY | O_DIRECTORY);
    if (d >= 0) {
      (void)!fchown(d, rt.job_uid, rt.job_gid);
      close(d);
    }
  }
  const int dir = OpenBeneath(work, ".oarbank-broker", O_RDONLY | O_DIRECTORY);
  close(work);
  if (dir < 0) {
    *error = config.work_dir + "/.oarbank-broker: " + strerror(errno);
    return -1;
  }
  const int fd = openat(dir, file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const int err = errno;
  close(dir);
  if (fd < 0) {
    *error = config.work_dir + "/.oarbank-broker/" + file + ": " + strerror(err);
    return -1;
  }
  if (fchown(fd, rt.job_uid, rt.job_gid) != 0) {
    *error = "chown " + file + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// A user namespace whose only mapping is the job's uid and gid (on disk)
// to `base` (container root on the host): the idmapping of the staging
// mounts. An fd of /proc/<child>/ns/user, or -1 with `error`.
int IdmapUserns(const RuntimeConfig& rt, std::string* error) {
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) {
    *error = std::string("idmap: pipe: ") + strerror(errno);
    return -1;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    char c;
    (void)!read(go[0], &c, 1);  // until the parent has what it needs
    _exit(0);
  }
  close(go[0]);
  if (child < 0) {
    close(go[1]);
    *error = std::string("idmap: fork: ") + strerror(errno);
    return -1;
  }
  const std::string proc = "/proc/" + std::to_string(child);
  int ns = -1;
  // The child unshares at once; bounded wait for its namespace to differ.
  struct stat mine {
  }, theirs{};
  stat("/proc/self/ns/user", &mine);
  for (int i = 0; i < 2000; ++i) {
    if (stat((proc + "/ns/user").c_str(), &theirs) == 0 && theirs.st_ino != mine.st_ino) break;
    usleep(1000);
  }
  auto write_map = [&](const char* file, unsigned long inside, unsigned long outside) {
    const int fd = open((proc + "/" + file).c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const std::string line = std::to_string(inside) + " " + std::to_string(outside) + " 1\n";
    const bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    close(fd);
    return ok;
  };
  if (theirs.st_ino != mine.st_ino && write_map("uid_map", rt.job_uid, rt.subid_base) &&
      write_map("gid_map", rt.job_gid, rt.subid_base))
    ns = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  const int err = errno;
  close(go[1]);
  WaitStatus(child);
  if (ns < 0) *error = std::string("idmap: user namespace: ") + strerror(err);
  return ns;
}

// Pins each mount source: opened below its base without symlinks, checked
// for sockets, then a detached clone of that fd, idmapped and nosuid,nodev,
// moved onto <staging>/<name>/<i> in this process's private mount
// namespace. Returns the staging paths, or an error; `pinned` gets the fds
// (for the walk after the run).
std::vector<std::string> PinMounts(const RuntimeConfig& rt, const RunRequest& req, const std::string& name,
                                   std::vector<int>* pinned, std::string* error) {
  std::vector<std::string> staged;
  if (req.mounts.empty()) return staged;
  static bool private_namespace = false;
  if (!private_namespace) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
      *error = std::string("private mount namespace: ") + strerror(errno);
      return {};
    }
    private_namespace = true;
  }
  const int userns = IdmapUserns(rt, error);
  if (userns < 0) return {};
  const std::string job_dir = StagingDir(rt);
  const std::string dir = job_dir + "/" + name;
  if ((mkdir(job_dir.c_str(), 0700) != 0 && errno != EEXIST) || (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)) {
    *error = dir + ": " + strerror(errno);
    close(userns);
    return {};
  }
  for (size_t i = 0; i < req.mounts.size(); ++i) {
    const Mount& m = req.mounts[i];
    const std::string field = "mounts[" + std::to_string(i) + "].src: ";
    const int base = open(m.base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    const int fd = base < 0 ? -1 : m.relative.empty() ? dup(base) : OpenBeneath(base, m.relative, O_PATH);
    const int err = errno;
    if (base >= 0) close(base);
    if (fd < 0) {
      *error = field + m.source + ": " + strerror(err);
      break;
    }
    struct stat st {};
    fstat(fd, &st);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      *error = field + m.source + " is neither a directory nor a regular file";
      close(fd);
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      if (std::string why = SocketInTree(fd); !why.empty()) {
        *error = field + m.source + ": " + why;
        close(fd);
        break;
      }
    }
    const std::string target = dir + "/" + std::to_string(i);
    if (S_ISDIR(st.st_mode)) {
      mkdir(target.c_str(), 0700);
    } else {
      const int t = open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (t >= 0) close(t);
    }
    // Not recursive: mounts below the source stay out of the container.
    const int tree = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m.read_only ? MOUNT_ATTR_RDONLY : 0);
    attr.userns_fd = static_cast<uint64_t>(userns);
    const bool ok = tree >= 0 && mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0 &&
                    move_mount(tree, "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) == 0;
    const int merr = errno;
    if (tree >= 0) close(tree);
    if (!ok) {
      *error = field + "pin " + m.source + ": " + strerror(merr);
      close(fd);
      break;
    }
    staged.push_back(target);
    pinned->push_back(fd);
  }
  close(userns);
  if (!error->empty()) return {};
  return staged;
}

void UnpinMounts(const RuntimeConfig& rt, const std::string& name, size_t count) {
  const std::string dir = StagingDir(rt) + "/" + name;
  for (size_t i = 0; i < count; ++i) {
    const std::string target = dir + "/" + std::to_string(i);
    umount2(target.c_str(), MNT_DETACH);
    if (rmdir(target.c_str()) != 0) unlink(target.c_str());
  }
  rmdir(dir.c_str());
}

// A bounded walk below the directory `fd` (never following a symlink or
// crossing into another mount): `visit(dirfd, name, st)` per entry, which
// may return false to stop. "" or why the walk did not finish.
template <typename Visit>
std::string WalkTree(int fd, Visit visit) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(kMaxWalkSeconds * 1000));
  size_t entries = 0;
  struct stat top {};
  if (fstat(fd, &top) != 0) return std::string("cannot stat: ") + strerror(errno);
  struct Frame {
    DIR* dir;
    int depth;
  };
  std::vector<Frame> stack;
  const int first = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (first < 0) return std::string("cannot open: ") + strerror(errno);
  DIR* d = fdopendir(first);
  if (d == nullptr) {
    close(first);
    return std::string("cannot read: ") + strerror(errno);
  }
  stack.push_back({d, 0});
  std::string why;
  while (!stack.empty() && why.empty()) {
    Frame& f = stack.back();
    errno = 0;
    dirent* e = readdir(f.dir);
    if (e == nullptr) {
      if (errno != 0) why = std::string("cannot read a directory: ") + strerror(errno);
      closedir(f.dir);
      stack.pop_back();
      continue;
    }
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (++entries > kMaxWalkEntries) {
      why = "holds more than " + std::to_string(kMaxWalkEntries) + " entries, more than the broker checks";
      break;
    }
    if ((entries & 255) == 0 && Clock::now() > deadline) {
      why = "took longer than the broker's check allows";
      break;
    }
    struct stat st {};
    const int dfd = dirfd(f.dir);
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      why = std::string(e->d_name) + ": cannot stat: " + strerror(errno);
      break;
    }
    if (!visit(dfd, e->d_name, st, &why)) break;
    if (S_ISDIR(st.st_mode) && st.st_dev == top.st_dev) {
      if (f.depth + 1 > kMaxWalkDepth) {
        why = "is deeper than " + std::to_string(kMaxWalkDepth) + " directories, more than the broker checks";
        break;
      }
      const int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        why = std::string(e->d_name) + ": cannot open: " + strerror(errno);
        break;
      }
      DIR* sd = fdopendir(sub);
      if (sd == nullptr) {
        close(sub);
        why = std::string(e->d_name) + ": cannot read: " + strerror(errno);
        break;
      }
      stack.push_back({sd, f.depth + 1});
    }
  }
  for (auto& f : stack) closedir(f.dir);
  return why;
}

// After a run: no setuid/setgid bit and no device node survives in a
// writable mount, and nothing there is owned by the job's container ids.
std::string CleanWritten(const RuntimeConfig& rt, int fd) {
  return WalkTree(fd, [&](int dfd, const char* name, const struct stat& st, std::string* why) {
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
        *why = std::string(name) + ": cannot remove a device node: " + strerror(errno);
        return false;
      }
      return true;
    }
    const bool foreign = (st.st_uid >= rt.subid_base && st.st_uid < rt.subid_base + kSubidCount) ||
                         (st.st_gid >= rt.subid_base && st.st_gid < rt.subid_base + kSubidCount);
    if (foreign && fchownat(dfd, name, rt.job_uid, rt.job_gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT) {
      *why = std::string(name) + ": cannot give it to the job: " + strerror(errno);
      return false;
    }
    if ((S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) && (st.st_mode & (S_ISUID | S_ISGID))) {
      // chown above may have cleared them already; by fd, never by a path a link could redirect.
      const int f = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      const std::string via = "/proc/self/fd/" + std::to_string(f);
      const bool ok = f >= 0 && chmod(via.c_str(), st.st_mode & 01777 & ~(S_ISUID | S_ISGID)) == 0;
      const int err = errno;
      if (f >= 0) close(f);
      if (!ok && err != ENOENT) {
        *why = std::string(name) + ": cannot clear setuid/setgid: " + strerror(err);
        return false;
      }
    }
    return true;
  });
}

}  // namespace

std::string StagingDir(const RuntimeConfig& rt) { return rt.state_dir + "/mounts/job-" + rt.job_id; }

void RemoveStaging(const RuntimeConfig& rt) {
  const std::string mounts = StagingDir(rt);
  DIR* dir = opendir(mounts.c_str());
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string staging = mounts + "/" + e->d_name;
    if (DIR* inner = opendir(staging.c_str())) {
      while (dirent* point = readdir(inner)) {
        if (point->d_name[0] == '.') continue;
        const std::string path = staging + "/" + point->d_name;
        // A point still mounted (in this namespace) is only detached.
        umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
        if (rmdir(path.c_str()) != 0) unlink(path.c_str());
      }
      closedir(inner);
    }
    rmdir(staging.c_str());
  }
  closedir(dir);
  rmdir(mounts.c_str());
}

std::string SocketInTree(int fd) {
  return WalkTree(fd, [](int, const char* name, const struct stat& st, std::string* why) {
    if (!S_ISSOCK(st.st_mode)) return true;
    *why = std::string("holds a unix socket (") + name + "): a host socket never reaches a container";
    return false;
  });
}

bool IsJobId(const std::string& id) {
  if (id.empty() || id.size() > 64 || id == "." || id == "..") return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  return true;
}

RuntimeProbe ProbeRuntime(const std::string& path_env) {
  RuntimeProbe p;
  p.podman = FindOnPath(path_env, "podman");
  p.runc = FindOnPath(path_env, "runc");
  if (p.podman.empty()) {
    p.detail = "podman is not on PATH (" + path_env + "): install Debian's podman, runc and uidmap";
  } else if (p.runc.empty()) {
    p.detail = "runc is not on PATH (" + path_env + "): crun refuses hybrid cgroups, so the broker needs runc";
  } else if (geteuid() != 0) {
    p.detail = "the broker maps container ids to the job's subordinate range with --uidmap, which needs root";
  } else {
    p.available = true;
    p.detail =
        p.podman + " with " + p.runc + " (cgroupfs, vfs storage, container root mapped to the job's subordinate range)";
  }
  return p;
}

std::string SlotRoot(const RuntimeConfig& rt) {
  if (rt.subid_base < kSubidBlockBase) return "";
  return rt.state_dir + "/j" + std::to_string((rt.subid_base - kSubidBlockBase) / kSubidRangeSize);
}

std::vector<std::string> GlobalArgs(const RuntimeConfig& rt) {
  const std::string slot = SlotRoot(rt);
  std::vector<std::string> args = {rt.podman};
  if (slot.empty()) {
    args.push_back("--root=" + rt.state_dir + "/storage");
    args.push_back("--runroot=" + rt.state_dir + "/run");
  } else {
    // The job's own containers and layers; the agent's images read-only.
    args.push_back("--root=" + slot + "/storage");
    args.push_back("--runroot=" + slot + "/run");
    args.push_back("--storage-opt=vfs.imagestore=" + rt.state_dir + "/storage");
  }
  for (std::string a : {"--tmpdir=" + rt.state_dir + "/tmp", "--runtime=" + rt.runc,
                        std::string("--storage-driver=vfs"), std::string("--cgroup-manager=cgroupfs"),
                        std::string("--events-backend=file"), std::string("--log-level=error")})
    args.push_back(std::move(a));
  return args;
}

std::string PrepareSlot(const RuntimeConfig& rt) {
  const std::string slot = SlotRoot(rt);
  if (slot.empty()) return "no subordinate id range";
  // Container root (an id no host account has) must reach its rootfs under
  // vfs/dir at every create: Podman creates these 0700 and hands dir/ to
  // the mapped root of whichever container it made last, so they are made
  // here first, root's and searchable (not listable) by others, and kept so.
  for (const char* sub : {"", "/storage", "/storage/vfs", "/storage/vfs/dir"}) {
    const std::string dir = slot + sub;
    if (mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return dir + ": " + strerror(errno);
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + ": not a directory";
    if ((st.st_mode & 07777) != 0711 && chmod(dir.c_str(), 0711) != 0) return dir + ": " + strerror(errno);
  }
  // The lease is this job's alone: whatever a job that died with this
  // range left here goes now.
  const Captured c = RunPodman(rt, {"rm", "--all", "--force", "--time=0"}, 60);
  if (c.status != 0) return slot + ": podman rm --all: " + c.err;
  return "";
}

std::vector<std::string> PodmanEnvironment(const RuntimeConfig& rt, const std::string& path_env) {
  return {"PATH=" + path_env,
          "HOME=" + rt.state_dir + "/home",
          "TMPDIR=" + rt.state_dir + "/tmp",
          "CONTAINERS_CONF=" + rt.state_dir + "/containers.conf",
          "CONTAINERS_STORAGE_CONF=" + rt.state_dir + "/storage.conf",
          "LANG=C.UTF-8"};
}

std::vector<std::string> BuildRunArgv(const RuntimeConfig& rt, const RunRequest& req,
                                      const std::vector<std::string>& sources, const std::string& name) {
  std::vector<std::string> argv = GlobalArgs(rt);
  const std::string map = "0:" + std::to_string(rt.subid_base) + ":" + std::to_string(kSubidCount);
  const long long memory = req.memory_bytes;
  // conmon's own bound, behind the broker's exact one: whole seconds, never
  // below what was asked (the broker kills at timeout_s itself).
  const long long backstop = static_cast<long long>(std::ceil(req.timeout_s)) + 1;
  for (std::string a : {std::string("run"),
                        std::string("--rm"),
                        std::string("--pull=never"),
                        "--platform=" + req.platform,
                        "--name=" + name,
                        "--label=oarbank.job=" + rt.job_id,
                        "--cpu-period=" + std::to_string(kCpuPeriodUs),
                        "--cpu-quota=" + std::to_string(req.cpu_quota_us),
                        "--memory=" + std::to_string(memory),
                        "--memory-swap=" + std::to_string(memory),
                        "--pids-limit=" + std::to_string(kPidsLimit),
                        "--timeout=" + std::to_string(backstop),
                        "--uidmap=" + map,
                        "--gidmap=" + map,
                        req.network ? "--network=ns:" + rt.job_netns : std::string("--network=none"),
                        std::string("--security-opt=no-new-privileges"),
                        std::string("--http-proxy=false"),
                        std::string("--systemd=false"),
                        std::string("--ipc=private"),
                        std::string("--pid=private"),
                        std::string("--uts=private"),
                        std::string("--cgroupns=private"),
                        std::string("--log-driver=none")})
    argv.push_back(std::move(a));
  for (size_t i = 0; i < req.mounts.size() && i < sources.size(); ++i)
    argv.push_back("--volume=" + sources[i] + ":" + req.mounts[i].destination +
                   (req.mounts[i].read_only ? ":ro" : ":rw") + ",nosuid,nodev");
  for (const auto& [k, v] : req.env) argv.push_back("--env=" + k + "=" + v);
  if (req.network && !rt.job_proxy.empty())
    for (const char* name : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"})
      argv.push_back(std::string("--env=") + name + "=" + rt.job_proxy);
  if (req.workdir) argv.push_back("--workdir=" + *req.workdir);
  if (req.entrypoint) {
    nlohmann::json ep = *req.entrypoint;
    argv.push_back("--entrypoint=" + ep.dump());
  }
  argv.push_back(req.image);
  argv.insert(argv.end(), req.args.begin(), req.args.end());
  return argv;
}

std::string PrepareState(const RuntimeConfig& rt) {
  for (const char* sub : {"", "/storage", "/run", "/tmp", "/home", "/mounts"}) {
    const std::string dir = rt.state_dir + sub;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return dir + ": " + strerror(errno);
  }
  // Hybrid cgroups: crun refuses them and the default ulimits cannot be
  // raised, so runc and no default ulimits.
  std::ofstream conf(rt.state_dir + "/containers.conf");
  conf << "# Written by oarbank-agent broker; the system's podman configuration is never used.\n"
          "[containers]\ndefault_ulimits = []\ndefault_sysctls = []\nhttp_proxy = false\n"
          "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\nruntime = \"runc\"\n";
  std::ofstream storage(rt.state_dir + "/storage.conf");
  storage << "[storage]\ndriver = \"vfs\"\ngraphroot = \"" << rt.state_dir << "/storage\"\nrunroot = \"" << rt.state_dir
          << "/run\"\n";
  conf.close();
  storage.close();
  if (!conf || !storage) return rt.state_dir + ": cannot write containers.conf or storage.conf";
  return "";
}

Captured RunPodman(const RuntimeConfig& rt, const std::vector<std::string>& args, double timeout_s) {
  Captured c;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return c;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return c;
  }
  std::vector<std::string> argv = GlobalArgs(rt);
  argv.insert(argv.end(), args.begin(), args.end());
  const char* path = getenv("PATH");
  const pid_t pid = Spawn(argv, PodmanEnvironment(rt, path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"), out[1], err[1]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return c;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  int fds[2] = {out[0], err[0]};
  std::string* sinks[2] = {&c.out, &c.err};
  bool killed = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    if (poll(p, 2, killed ? 1000 : static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i], buf, sizeof buf);
      if (n > 0 && sinks[i]->size() < (1u << 20)) sinks[i]->append(buf, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  c.status = WaitStatus(pid);
  return c;
}

bool ImagePresent(const RuntimeConfig& rt, const std::string& reference) {
  return RunPodman(rt, {"image", "exists", reference}).status == 0;
}

std::optional<std::vector<std::string>> JobContainers(const RuntimeConfig& rt, bool running_only, std::string* why) {
  std::vector<std::string> args = {"ps", "--quiet", "--no-trunc", "--filter=label=oarbank.job=" + rt.job_id};
  if (!running_only) args.push_back("--all");
  const Captured c = RunPodman(rt, args);
  if (c.status != 0) {
    if (why) *why = "podman ps failed for job " + rt.job_id + " (status " + std::to_string(c.status) + "): " + c.err;
    return std::nullopt;
  }
  std::vector<std::string> ids;
  std::stringstream in(c.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.push_back(line);
  return ids;
}

std::string RemoveJobContainers(const RuntimeConfig& rt) {
  std::string why;
  const auto ids = JobContainers(rt, false, &why);
  if (!ids) return why;
  if (ids->empty()) return "";
  std::vector<std::string> args = {"rm", "--force", "--time=0"};
  args.insert(args.end(), ids->begin(), ids->end());
  const Captured c = RunPodman(rt, args, 120);
  const auto left = JobContainers(rt, false, &why);
  if (!left) return why;
  if (!left->empty()) return "podman rm left containers of job " + rt.job_id + ": " + c.err;
  return "";
}

namespace {

// Whether the peer of `fd` has closed the connection (a full close: a
// client that shut down its writing side still waits for the answer).
bool HungUp(int fd) {
  pollfd p = {fd, 0, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

// Podman says it knows no container `name` (`container exists` answers 1;
// an error or a time-out is not an answer).
bool ContainerGone(const RuntimeConfig& rt, const std::string& name) {
  return RunPodman(rt, {"container", "exists", name}, 10).status == 1;
}

struct Removal {
  int status = -1;    // the podman client's
  bool gone = false;  // the container is no more
};

// Removes the container `name` whatever its state, and stops the podman
// client `pid`: podman rm --force until Podman no longer knows the name and
// the client has exited, within kKillGraceS. A container that does not
// exist yet (still being created) is retried, never counted as removed.
Removal RemoveContainer(const RuntimeConfig& rt, const std::string& name, pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(kKillGraceS * 1000));
  int status = -1;
  bool client_done = pid < 0;
  for (int round = 0;; ++round) {
    RunPodman(rt, {"rm", "--force", "--time=0", "--ignore", name}, 10);
    if (!client_done) {
      int st = 0;
      const pid_t r = waitpid(pid, &st, WNOHANG);
      if (r == pid) {
        client_done = true;
        status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
      } else if (r < 0 && errno != EINTR) {
        client_done = true;
      }
    }
    if (client_done && ContainerGone(rt, name)) return {status, true};
    if (Clock::now() > deadline) break;
    // The client keeps the container coming up if it is still creating it:
    // after a few rounds, it goes too (PR_SET_PDEATHSIG covers its children).
    if (!client_done && round >= 4) kill(pid, SIGKILL);
    usleep(200000);
  }
  if (!client_done) {
    kill(pid, SIGKILL);
    status = WaitStatus(pid);
  }
  RunPodman(rt, {"rm", "--force", "--time=0", "--ignore", name}, 10);
  return {status, ContainerGone(rt, name)};
}

}  // namespace

nlohmann::ordered_json RunContainer(const RuntimeConfig& rt, const BrokerConfig& config, const RunRequest& req,
                                    int client_fd, Clock::time_point accepted) {
  static std::atomic<unsigned> counter{0};
  const std::string name = "oarbank-" + rt.job_id + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  const auto deadline = accepted + std::chrono::milliseconds(static_cast<long long>(req.timeout_s * 1000));
  auto refuse = [](Refusal r, std::string detail) { return RefusalJson({r, std::move(detail)}); };
  if (rt.subid_base == 0) return refuse(Refusal::kRuntimeUnavailable, "this job holds no subordinate id range");
  if (!ImagePresent(rt, req.image))
    return refuse(
        Refusal::kRuntimeUnavailable,
        "image: " + req.image + " is not in the agent's image store (the broker never pulls from a registry)");

  std::string error;
  const int out_file = CreateOutputFile(config, rt, name + ".stdout", &error);
  const int err_file = out_file < 0 ? -1 : CreateOutputFile(config, rt, name + ".stderr", &error);
  if (out_file < 0 || err_file < 0) {
    if (out_file >= 0) close(out_file);
    return refuse(Refusal::kBadMount, "output: " + error);
  }
  std::vector<int> pinned;
  const std::vector<std::string> staged = PinMounts(rt, req, name, &pinned, &error);
  auto unpin = [&] {
    UnpinMounts(rt, name, req.mounts.size());
    for (int fd : pinned) close(fd);
    pinned.clear();
  };
  if (!error.empty()) {
    close(out_file);
    close(err_file);
    unpin();
    return refuse(Refusal::kBadMount, error);
  }

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    close(out_file);
    close(err_file);
    unpin();
    return refuse(Refusal::kRuntimeUnavailable, std::string("pipe: ") + strerror(errno));
  }
  const char* path = getenv("PATH");
  const auto started = Clock::now();
  // The deadline and the hang-up count from the request's acceptance: a
  // request whose time ran out while it was prepared never starts.
  bool timed_out = Clock::now() >= deadline, hung_up = HungUp(client_fd);
  const pid_t pid = timed_out || hung_up
                        ? -1
                        : Spawn(BuildRunArgv(rt, req, staged, name),
                                PodmanEnvironment(rt, path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"), out[1], err[1]);
  close(out[1]);
  close(err[1]);

  int fds[2] = {out[0], err[0]};
  const int files[2] = {out_file, err_file};
  std::string tails[2];
  uint64_t written[2] = {0, 0};
  int status = -1;
  bool reaped = pid < 0;
  bool removed = true;  // false: the container outlived every removal
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (pid >= 0 && (timed_out || hung_up)) {
      // The container, not only the podman client: conmon keeps it alive
      // otherwise, and it may not exist yet.
      const Removal removal = RemoveContainer(rt, name, pid);
      status = removal.status;
      removed = removal.gone;
      reaped = true;
      break;
    }
    pollfd p[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {client_fd, 0, 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      continue;
    }
    if (poll(p, 3, static_cast<int>(std::clamp<long long>(left, 1, 1000))) < 0 && errno != EINTR) {
      if (pid < 0) break;
      hung_up = true;  // nothing more can be watched: the container goes
      continue;
    }
    if (p[2].revents & (POLLHUP | POLLERR)) hung_up = true;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[16384];
      const ssize_t n = read(fds[i], buf, sizeof buf);
      if (n > 0) {
        KeepTail(tails[i], buf, static_cast<size_t>(n));
        if (written[i] < kMaxOutputBytes) {
          const size_t keep = static_cast<size_t>(std::min<uint64_t>(kMaxOutputBytes - written[i], n));
          if (write(files[i], buf, keep) == static_cast<ssize_t>(keep)) written[i] += keep;
        }
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  if (!reaped) status = WaitStatus(pid);
  // The client is gone; with --rm the container should be too. Make sure.
  if (pid >= 0 && removed && !ContainerGone(rt, name)) removed = RemoveContainer(rt, name, -1).gone;
  const double duration = std::chrono::duration<double>(Clock::now() - started).count();
  close(out_file);
  close(err_file);
  std::string unchecked;
  for (size_t i = 0; i < pinned.size() && i < req.mounts.size(); ++i) {
    if (req.mounts[i].read_only) continue;
    struct stat st {};
    if (fstat(pinned[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      // A file mount: its own bits only.
      std::string why;
      if (pinned[i] < 0 || !S_ISREG(st.st_mode)) {
        why = "cannot check the mounted file";
      } else if (st.st_mode & (S_ISUID | S_ISGID)) {
        const std::string via = "/proc/self/fd/" + std::to_string(pinned[i]);
        if (chmod(via.c_str(), st.st_mode & 01777 & ~(S_ISUID | S_ISGID)) != 0)
          why = std::string("cannot clear setuid/setgid: ") + strerror(errno);
      }
      if (!why.empty() && unchecked.empty()) unchecked = "mounts[" + std::to_string(i) + "]: " + why;
      continue;
    }
    if (std::string why = CleanWritten(rt, pinned[i]); !why.empty() && unchecked.empty())
      unchecked = "mounts[" + std::to_string(i) + "]: " + why;
  }
  unpin();

  nlohmann::ordered_json answer;
  answer["ok"] = true;
  answer["exit_code"] = status;
  answer["timed_out"] = timed_out;
  answer["stdout_tail"] = tails[0];
  answer["stderr_tail"] = tails[1];
  answer["stdout_path"] = config.work_dir + "/.oarbank-broker/" + name + ".stdout";
  answer["stderr_path"] = config.work_dir + "/.oarbank-broker/" + name + ".stderr";
  answer["duration_s"] = std::round(duration * 1000) / 1000;
  answer["container"] = name;
  answer["container_removed"] = removed;
  answer["work_checked"] = unchecked.empty();
  if (!unchecked.empty()) answer["work_check"] = unchecked;
  return answer;
}

}  // namespace oarbank::broker
