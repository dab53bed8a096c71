#include "sandbox/broker/podman.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "sandbox/broker/container_seccomp.h"
#include "sandbox/broker/subid_ranges.h"
#include "sandbox/common/helper_path.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/common/subprocess.h"
#include "sandbox/common/trust_file.h"

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

}  // namespace

std::string ContainerInitPathFor(const std::string& program) {
  return HelperPathFor(program, "oarbank-container-init", OARBANK_CONTAINER_INIT);
}

RuntimeProbe ProbeRuntime(const std::string& path_env) {
  RuntimeProbe p;
  p.podman = FindOnPath(path_env, "podman");
  p.runc = FindOnPath(path_env, "runc");
  p.container_init = ContainerInitPathFor("/proc/self/exe");
  auto init = ReadTrustedFile(p.container_init);
  if (p.podman.empty()) {
    p.detail = "podman is not on PATH (" + path_env + "): install Debian's podman, runc and uidmap";
  } else if (p.runc.empty()) {
    p.detail = "runc is not on PATH (" + path_env + "): crun refuses hybrid cgroups, so the broker needs runc";
  } else if (!init.ok() || !init.value()) {
    p.detail = "oarbank-container-init: " + (init.ok() ? p.container_init + " is not installed" : init.error().what) +
               " (without it a container could outlive a dead broker)";
  } else if (geteuid() != 0) {
    p.detail = "the broker maps container ids to the job's subordinate range with --uidmap, which needs root";
  } else {
    p.available = true;
    p.detail = p.podman + " with " + p.runc +
               " (cgroupfs, vfs storage, container root mapped to the job's subordinate range, first process " +
               p.container_init + ")";
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
  const CapturedRun c = RunPodman(rt, {"rm", "--all", "--force", "--time=0"}, 60);
  if (c.ExitCode() != 0) return slot + ": podman rm --all: " + c.err;
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
  // The containers' seccomp profile (container_seccomp.h), from the
  // default one, which only root may have written; none, none runs.
  auto base = ReadTrustedFile(kDefaultSeccompProfile);
  if (!base.ok()) return std::string(kDefaultSeccompProfile) + ": " + base.error().what;
  if (!base.value())
    return std::string(kDefaultSeccompProfile) + " is not installed (Debian's golang-github-containers-common)";
  auto profile = ContainerSeccompProfile(*base.value());
  if (!profile.ok()) return std::string(kDefaultSeccompProfile) + ": " + profile.error().what;
  if (auto err = WriteTrustedFile(SeccompProfilePath(rt), profile.value(), 0600))
    return SeccompProfilePath(rt) + ": " + err->what;
  return "";
}

CapturedRun RunPodman(const RuntimeConfig& rt, const std::vector<std::string>& args, double timeout_s) {
  SubprocessSpec spec;
  spec.argv = GlobalArgs(rt);
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  const char* path = getenv("PATH");
  spec.env = PodmanEnvironment(rt, path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  // Podman dies with the request's process (and so with the broker): no
  // client goes on creating a container nobody will remove.
  spec.die_with_caller = true;
  CaptureLimits limits;
  limits.deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  return RunCaptured(spec, limits);
}

bool ImagePresent(const RuntimeConfig& rt, const std::string& reference) {
  return RunPodman(rt, {"image", "exists", reference}).ExitCode() == 0;
}

std::optional<std::vector<std::string>> JobContainers(const RuntimeConfig& rt, bool running_only, std::string* why) {
  std::vector<std::string> args = {"ps", "--quiet", "--no-trunc", "--filter=label=oarbank.job=" + rt.job_id};
  if (!running_only) args.push_back("--all");
  const CapturedRun c = RunPodman(rt, args);
  if (c.ExitCode() != 0) {
    if (why)
      *why = "podman ps failed for job " + rt.job_id + " (status " + std::to_string(c.ExitCode()) + "): " + c.err;
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
  const CapturedRun c = RunPodman(rt, args, 120);
  const auto left = JobContainers(rt, false, &why);
  if (!left) return why;
  if (!left->empty()) return "podman rm left containers of job " + rt.job_id + ": " + c.err;
  return "";
}

bool ContainerGone(const RuntimeConfig& rt, const std::string& name) {
  return RunPodman(rt, {"container", "exists", name}, 10).ExitCode() == 1;
}

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
        status = st;
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
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  RunPodman(rt, {"rm", "--force", "--time=0", "--ignore", name}, 10);
  return {status, ContainerGone(rt, name)};
}

}  // namespace oarbank::broker
