#include "container_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
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

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
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
int OpenBeneath(int base_fd, const std::string& rel, uint64_t flags) {
  open_how how {};
  how.flags = flags | O_CLOEXEC;  // RESOLVE_NO_SYMLINKS covers the last component
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(syscall(SYS_openat2, base_fd, rel.c_str(), &how, sizeof how));
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

// Pins each mount source: opened below its base without symlinks, then that
// fd bind-mounted onto <state>/mounts/<name>/<i> in this process's private
// mount namespace. Returns the staging paths, or an error.
std::vector<std::string> PinMounts(const RuntimeConfig& rt, const RunRequest& req, const std::string& name,
                                   std::string* error) {
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
  const std::string dir = rt.state_dir + "/mounts/" + name;
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = dir + ": " + strerror(errno);
    return {};
  }
  for (size_t i = 0; i < req.mounts.size(); ++i) {
    const Mount& m = req.mounts[i];
    const int base = open(m.base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    const int fd = base < 0 ? -1 : m.relative.empty() ? dup(base) : OpenBeneath(base, m.relative, O_PATH);
    const int err = errno;
    if (base >= 0) close(base);
    if (fd < 0) {
      *error = "mounts[" + std::to_string(i) + "].src: " + m.source + ": " + strerror(err);
      return {};
    }
    struct stat st {};
    fstat(fd, &st);
    const std::string target = dir + "/" + std::to_string(i);
    if (S_ISDIR(st.st_mode)) {
      mkdir(target.c_str(), 0700);
    } else {
      const int t = open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (t >= 0) close(t);
    }
    const std::string via = "/proc/self/fd/" + std::to_string(fd);
    const bool ok = (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
                    mount(via.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) == 0;
    const int merr = errno;
    close(fd);
    if (!ok) {
      *error = "mounts[" + std::to_string(i) + "].src: pin " + m.source + ": " + strerror(merr);
      return {};
    }
    staged.push_back(target);
  }
  return staged;
}

void UnpinMounts(const RuntimeConfig& rt, const std::string& name, size_t count) {
  const std::string dir = rt.state_dir + "/mounts/" + name;
  for (size_t i = 0; i < count; ++i) {
    const std::string target = dir + "/" + std::to_string(i);
    umount2(target.c_str(), MNT_DETACH);
    if (rmdir(target.c_str()) != 0) unlink(target.c_str());
  }
  rmdir(dir.c_str());
}

}  // namespace

bool IsJobId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
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
    p.detail = "the broker maps container root to the job's uid with --uidmap, which needs root";
  } else {
    p.available = true;
    p.detail = p.podman + " with " + p.runc + " (cgroupfs, vfs storage, container root mapped to the job's uid)";
  }
  return p;
}

std::vector<std::string> GlobalArgs(const RuntimeConfig& rt) {
  return {rt.podman,
          "--root=" + rt.state_dir + "/storage",
          "--runroot=" + rt.state_dir + "/run",
          "--tmpdir=" + rt.state_dir + "/tmp",
          "--runtime=" + rt.runc,
          "--storage-driver=vfs",
          "--cgroup-manager=cgroupfs",
          "--events-backend=file",
          "--log-level=error"};
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
  const std::string uid = std::to_string(rt.job_uid), gid = std::to_string(rt.job_gid);
  const std::string base = std::to_string(rt.subid_base), count = std::to_string(kSubidCount - 1);
  const long long memory = std::llround(req.mem_gb * 1024.0 * 1024.0 * 1024.0);
  for (std::string a : {std::string("run"), std::string("--rm"), std::string("--pull=never"),
                        "--platform=" + req.platform, "--name=" + name, "--label=oarbank.job=" + rt.job_id,
                        "--cpus=" + Fixed(req.cpus, 3), "--memory=" + std::to_string(memory),
                        "--memory-swap=" + std::to_string(memory), "--pids-limit=" + std::to_string(kPidsLimit),
                        "--uidmap=0:" + uid + ":1", "--uidmap=1:" + base + ":" + count, "--gidmap=0:" + gid + ":1",
                        "--gidmap=1:" + base + ":" + count,
                        std::string(req.network ? "--network=bridge" : "--network=none"),
                        std::string("--security-opt=no-new-privileges"), std::string("--http-proxy=false"),
                        std::string("--systemd=false"), std::string("--ipc=private"), std::string("--pid=private"),
                        std::string("--uts=private"), std::string("--cgroupns=private"),
                        std::string("--log-driver=none")})
    argv.push_back(std::move(a));
  for (size_t i = 0; i < req.mounts.size() && i < sources.size(); ++i)
    argv.push_back("--volume=" + sources[i] + ":" + req.mounts[i].destination +
                   (req.mounts[i].read_only ? ":ro" : ":rw"));
  for (const auto& [k, v] : req.env) argv.push_back("--env=" + k + "=" + v);
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
          "[containers]\ndefault_ulimits = []\nhttp_proxy = false\n"
          "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\nruntime = \"runc\"\n";
  std::ofstream storage(rt.state_dir + "/storage.conf");
  storage << "[storage]\ndriver = \"vfs\"\ngraphroot = \"" << rt.state_dir << "/storage\"\nrunroot = \""
          << rt.state_dir << "/run\"\n";
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

std::vector<std::string> JobContainers(const RuntimeConfig& rt, bool running_only) {
  std::vector<std::string> args = {"ps", "--quiet", "--no-trunc", "--filter=label=oarbank.job=" + rt.job_id};
  if (!running_only) args.push_back("--all");
  const Captured c = RunPodman(rt, args);
  std::vector<std::string> ids;
  std::stringstream in(c.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) ids.push_back(line);
  return ids;
}

std::string RemoveJobContainers(const RuntimeConfig& rt) {
  std::vector<std::string> ids = JobContainers(rt);
  if (ids.empty()) return "";
  std::vector<std::string> args = {"rm", "--force", "--time=0"};
  args.insert(args.end(), ids.begin(), ids.end());
  const Captured c = RunPodman(rt, args, 120);
  if (!JobContainers(rt).empty()) return "podman rm left containers of job " + rt.job_id + ": " + c.err;
  return "";
}

nlohmann::ordered_json RunContainer(const RuntimeConfig& rt, const BrokerConfig& config, const RunRequest& req,
                                    int client_fd) {
  static std::atomic<unsigned> counter{0};
  const std::string name = "oarbank-" + rt.job_id + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  auto refuse = [](Refusal r, std::string detail) { return RefusalJson({r, std::move(detail)}); };
  if (!ImagePresent(rt, req.image))
    return refuse(Refusal::kRuntimeUnavailable,
                  "image: " + req.image + " is not in the agent's image store (the broker never pulls from a registry)");

  std::string error;
  const int out_file = CreateOutputFile(config, rt, name + ".stdout", &error);
  const int err_file = out_file < 0 ? -1 : CreateOutputFile(config, rt, name + ".stderr", &error);
  if (out_file < 0 || err_file < 0) {
    if (out_file >= 0) close(out_file);
    return refuse(Refusal::kBadMount, "output: " + error);
  }
  const std::vector<std::string> staged = PinMounts(rt, req, name, &error);
  if (!error.empty()) {
    close(out_file);
    close(err_file);
    UnpinMounts(rt, name, req.mounts.size());
    return refuse(Refusal::kBadMount, error);
  }

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    close(out_file);
    close(err_file);
    UnpinMounts(rt, name, staged.size());
    return refuse(Refusal::kRuntimeUnavailable, std::string("pipe: ") + strerror(errno));
  }
  const char* path = getenv("PATH");
  const auto started = Clock::now();
  const pid_t pid = Spawn(BuildRunArgv(rt, req, staged, name),
                          PodmanEnvironment(rt, path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"), out[1], err[1]);
  close(out[1]);
  close(err[1]);

  const auto deadline = started + std::chrono::milliseconds(static_cast<long long>(req.timeout_s * 1000));
  int fds[2] = {out[0], err[0]};
  const int files[2] = {out_file, err_file};
  std::string tails[2];
  uint64_t written[2] = {0, 0};
  bool timed_out = false, hung_up = false, killed = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {killed ? -1 : client_fd, 0, 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (!killed && left <= 0) timed_out = true;
    if (!killed && (timed_out || hung_up)) {
      // The container, not only the podman client: conmon keeps it alive otherwise.
      RunPodman(rt, {"kill", "--signal=KILL", name}, 30);
      killed = true;
      continue;
    }
    if (poll(p, 3, killed ? 1000 : static_cast<int>(std::clamp<long long>(left, 1, 1000))) < 0 && errno != EINTR) break;
    // Only a full close: a client that shut down its writing side still
    // waits for the answer.
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
  const int status = pid < 0 ? -1 : WaitStatus(pid);
  const double duration = std::chrono::duration<double>(Clock::now() - started).count();
  close(out_file);
  close(err_file);
  UnpinMounts(rt, name, staged.size());

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
  return answer;
}

}  // namespace oarbank::broker
