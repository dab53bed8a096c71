#include "sandbox/broker/mount_staging.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "sandbox/common/open_no_symlinks.h"

namespace oarbank::broker {
namespace {

using Clock = std::chrono::steady_clock;

// A user namespace whose only mapping is the job's uid and gid (on disk)
// to `base` (container root on the host): the idmapping of the staging
// mounts. An fd of /proc/<child>/ns/user, or -1 with `error`.
UniqueFd IdmapUserns(const RuntimeConfig& rt, std::string* error) {
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) {
    *error = std::string("idmap: pipe: ") + strerror(errno);
    return UniqueFd();
  }
  UniqueFd hold(go[0]), release(go[1]);
  const pid_t child = fork();
  if (child == 0) {
    release.Reset();
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    char c;
    (void)!read(hold.get(), &c, 1);  // until the parent has what it needs
    _exit(0);
  }
  hold.Reset();
  if (child < 0) {
    *error = std::string("idmap: fork: ") + strerror(errno);
    return UniqueFd();
  }
  const std::string proc = "/proc/" + std::to_string(child);
  // The child unshares at once; bounded wait for its namespace to differ.
  struct stat mine {
  }, theirs{};
  stat("/proc/self/ns/user", &mine);
  for (int i = 0; i < 2000; ++i) {
    if (stat((proc + "/ns/user").c_str(), &theirs) == 0 && theirs.st_ino != mine.st_ino) break;
    usleep(1000);
  }
  auto write_map = [&](const char* file, unsigned long inside, unsigned long outside) {
    const UniqueFd fd(open((proc + "/" + file).c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return false;
    const std::string line = std::to_string(inside) + " " + std::to_string(outside) + " 1\n";
    return write(fd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
  };
  UniqueFd ns;
  if (theirs.st_ino != mine.st_ino && write_map("uid_map", rt.job_uid, rt.subid_base) &&
      write_map("gid_map", rt.job_gid, rt.subid_base))
    ns.Reset(open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  const int err = errno;
  release.Reset();
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!ns.valid()) *error = std::string("idmap: user namespace: ") + strerror(err);
  return ns;
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

}  // namespace

// A directory below `base` reached without following any symlink.
// openat2(RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV), or the
// equivalent walk where the kernel has no openat2 (common/open_no_symlinks.h).
int OpenBeneath(int base_fd, const std::string& rel, int flags) {
  return OpenNoSymlinksAt(base_fd, rel.c_str(), flags, /*no_xdev=*/true, /*beneath=*/true);
}

// <work>/.oarbank-broker/<name>.<stream>, created for the job (never an
// existing file, never through a symlink the module planted).
UniqueFd CreateOutputFile(const BrokerConfig& config, const RuntimeConfig& rt, const std::string& file,
                          std::string* error) {
  const UniqueFd work(open(config.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!work.valid()) {
    *error = config.work_dir + ": " + strerror(errno);
    return UniqueFd();
  }
  if (mkdirat(work.get(), ".oarbank-broker", 0755) == 0) {
    const UniqueFd made(OpenBeneath(work.get(), ".oarbank-broker", O_RDONLY | O_DIRECTORY));
    if (made.valid()) (void)!fchown(made.get(), rt.job_uid, rt.job_gid);
  }
  const UniqueFd dir(OpenBeneath(work.get(), ".oarbank-broker", O_RDONLY | O_DIRECTORY));
  if (!dir.valid()) {
    *error = config.work_dir + "/.oarbank-broker: " + strerror(errno);
    return UniqueFd();
  }
  UniqueFd fd(openat(dir.get(), file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    *error = config.work_dir + "/.oarbank-broker/" + file + ": " + strerror(errno);
    return UniqueFd();
  }
  if (fchown(fd.get(), rt.job_uid, rt.job_gid) != 0) {
    *error = "chown " + file + ": " + strerror(errno);
    return UniqueFd();
  }
  return fd;
}

// Pins each mount source: opened below its base without symlinks, checked
// for sockets, then a detached clone of that fd, idmapped and nosuid,nodev,
// moved onto <staging>/<name>/<i> in this process's private mount
// namespace. Returns the staging paths, or an error; `pinned` gets the fds
// (for the walk after the run).
std::vector<std::string> PinMounts(const RuntimeConfig& rt, const RunRequest& req, const std::string& name,
                                   std::vector<UniqueFd>* pinned, std::string* error) {
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
  const UniqueFd userns = IdmapUserns(rt, error);
  if (!userns.valid()) return {};
  const std::string job_dir = StagingDir(rt);
  const std::string dir = job_dir + "/" + name;
  if ((mkdir(job_dir.c_str(), 0700) != 0 && errno != EEXIST) || (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)) {
    *error = dir + ": " + strerror(errno);
    return {};
  }
  for (size_t i = 0; i < req.mounts.size(); ++i) {
    const Mount& m = req.mounts[i];
    const std::string field = "mounts[" + std::to_string(i) + "].src: ";
    UniqueFd fd;
    int err = 0;
    {
      const UniqueFd base(open(m.base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (base.valid()) fd.Reset(m.relative.empty() ? dup(base.get()) : OpenBeneath(base.get(), m.relative, O_PATH));
      err = errno;
    }
    if (!fd.valid()) {
      *error = field + m.source + ": " + strerror(err);
      break;
    }
    struct stat st {};
    fstat(fd.get(), &st);
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      *error = field + m.source + " is neither a directory nor a regular file";
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      if (std::string why = SocketInTree(fd.get()); !why.empty()) {
        *error = field + m.source + ": " + why;
        break;
      }
    }
    const std::string target = dir + "/" + std::to_string(i);
    if (S_ISDIR(st.st_mode)) {
      mkdir(target.c_str(), 0700);
    } else {
      const UniqueFd made(open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    }
    // Not recursive: mounts below the source stay out of the container.
    const UniqueFd tree(open_tree(fd.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m.read_only ? MOUNT_ATTR_RDONLY : 0);
    attr.userns_fd = static_cast<uint64_t>(userns.get());
    const bool ok = tree.valid() && mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) == 0 &&
                    move_mount(tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) == 0;
    if (!ok) {
      *error = field + "pin " + m.source + ": " + strerror(errno);
      break;
    }
    staged.push_back(target);
    pinned->push_back(std::move(fd));
  }
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
      const UniqueFd f(openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
      const std::string via = "/proc/self/fd/" + std::to_string(f.get());
      const bool ok = f.valid() && chmod(via.c_str(), st.st_mode & 01777 & ~(S_ISUID | S_ISGID)) == 0;
      const int err = errno;
      if (!ok && err != ENOENT) {
        *why = std::string(name) + ": cannot clear setuid/setgid: " + strerror(err);
        return false;
      }
    }
    return true;
  });
}

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

}  // namespace oarbank::broker
