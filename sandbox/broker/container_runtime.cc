#include "sandbox/broker/container_runtime.h"

#include "sandbox/broker/mount_staging.h"
#include "sandbox/broker/podman.h"
#include "sandbox/broker/subid_ranges.h"
#include "sandbox/common/subprocess.h"
#include "sandbox/common/unique_fd.h"

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

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace oarbank::broker {
namespace {

using Clock = std::chrono::steady_clock;

// Appends to `tail`, keeping its last kTailBytes.
void KeepTail(std::string& tail, const char* buf, size_t n) {
  tail.append(buf, n);
  if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
}

// After a run, every writable mount as CleanWritten leaves it (a file
// mount: its own setuid and setgid bits cleared), each one whatever the
// others gave; "" or the first that could not be checked.
std::string CheckWrittenMounts(const RuntimeConfig& rt, const RunRequest& req, const std::vector<UniqueFd>& pinned) {
  std::string first;
  for (size_t i = 0; i < pinned.size() && i < req.mounts.size(); ++i) {
    if (req.mounts[i].read_only) continue;
    const int fd = pinned[i].get();
    struct stat st {};
    std::string why;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      why = CleanWritten(rt, fd);
    } else if (!S_ISREG(st.st_mode)) {
      why = "cannot check the mounted file";
    } else if (st.st_mode & (S_ISUID | S_ISGID)) {
      const std::string via = "/proc/self/fd/" + std::to_string(fd);
      if (chmod(via.c_str(), st.st_mode & 01777 & ~(S_ISUID | S_ISGID)) != 0)
        why = std::string("cannot clear setuid/setgid: ") + strerror(errno);
    }
    if (!why.empty() && first.empty()) first = "mounts[" + std::to_string(i) + "]: " + why;
  }
  return first;
}

}  // namespace

bool IsJobId(const std::string& id) {
  if (id.empty() || id.size() > 64 || id == "." || id == "..") return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  return true;
}

std::vector<std::string> BuildRunArgv(const RuntimeConfig& rt, const RunRequest& req,
                                      const std::vector<std::string>& sources, const std::string& name) {
  std::vector<std::string> argv = GlobalArgs(rt);
  const std::string map = "0:" + std::to_string(rt.subid_base) + ":" + std::to_string(kSubidCount);
  const long long memory = req.memory_bytes;
  // conmon's own bound, behind the broker's exact one: whole seconds, never
  // below what was asked (the broker kills at timeout_s itself).
  const long long backstop = static_cast<long long>(std::ceil(req.timeout_s)) + 1;
  // --init: the container's first process is ours, with the broker's
  // lifeline on its descriptor 3 (--preserve-fds=1, RunClient).
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
                        "--security-opt=seccomp=" + SeccompProfilePath(rt),
                        std::string("--http-proxy=false"),
                        std::string("--systemd=false"),
                        std::string("--ipc=private"),
                        std::string("--pid=private"),
                        std::string("--uts=private"),
                        std::string("--cgroupns=private"),
                        std::string("--log-driver=none"),
                        std::string("--init"),
                        "--init-path=" + rt.container_init,
                        std::string("--preserve-fds=1")})
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

namespace {

// Whether the peer of `fd` has closed the connection (a full close: a
// client that shut down its writing side still waits for the answer).
bool HungUp(int fd) {
  pollfd p = {fd, 0, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

// The podman client of one run, its output streamed into `files` (up to
// kMaxOutputBytes each, the last kTailBytes kept as tails). At the deadline,
// or when the client hangs up, the container goes, not only the client:
// conmon keeps it alive otherwise, and it may not exist yet.
struct ClientRun {
  bool ran = false;
  int status = -1;
  bool timed_out = false;
  bool hung_up = false;
  bool removed = true;  // false: the container outlived every removal
  std::string tails[2];
  std::string error;  // it could not be started
};

ClientRun RunClient(const RuntimeConfig& rt, const RunRequest& req, const std::vector<std::string>& staged,
                    const std::string& name, int client_fd, Clock::time_point deadline, std::array<int, 2> files) {
  ClientRun run;
  // The deadline and the hang-up count from the request's acceptance: a
  // request whose time ran out while it was prepared never starts.
  run.timed_out = Clock::now() >= deadline;
  run.hung_up = HungUp(client_fd);
  if (run.timed_out || run.hung_up) return run;
  // The container's lifeline: its init holds the read end (podman passes
  // it as descriptor 3), this process alone the write end (close-on-exec:
  // no child keeps it). When the broker dies the kernel closes it and the
  // init ends the container; it also closes here once the run is over.
  int lifeline[2];
  if (pipe2(lifeline, O_CLOEXEC) != 0) {
    run.error = std::string("pipe: ") + strerror(errno);
    return run;
  }
  const UniqueFd lifeline_r(lifeline[0]), lifeline_w(lifeline[1]);
  SubprocessSpec spec;
  spec.argv = BuildRunArgv(rt, req, staged, name);
  spec.fds = {{lifeline_r.get(), 3}};
  const char* path = getenv("PATH");
  spec.env = PodmanEnvironment(rt, path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  spec.die_with_caller = true;
  CaptureLimits limits;
  limits.deadline = deadline;
  limits.max_bytes = 0;  // kept as tails and in the output files instead
  limits.hangup_fd = client_fd;
  uint64_t written[2] = {0, 0};
  limits.on_output = [&](int stream, std::string_view chunk) {
    KeepTail(run.tails[stream], chunk.data(), chunk.size());
    if (written[stream] >= kMaxOutputBytes) return;
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(kMaxOutputBytes - written[stream], chunk.size()));
    if (write(files[stream], chunk.data(), keep) == static_cast<ssize_t>(keep)) written[stream] += keep;
  };
  limits.end = [&](pid_t pid) {
    const Removal removal = RemoveContainer(rt, name, pid);
    run.removed = removal.gone;
    return removal.wait_status;
  };
  const CapturedRun client = RunCaptured(spec, limits);
  if (!client.started) {
    run.error = client.error;
    return run;
  }
  run.ran = true;
  run.timed_out = client.timed_out;
  run.hung_up = client.hung_up;
  run.status = client.ExitCode();
  return run;
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
  UniqueFd out_file = CreateOutputFile(config, rt, name + ".stdout", &error);
  UniqueFd err_file = out_file.valid() ? CreateOutputFile(config, rt, name + ".stderr", &error) : UniqueFd();
  if (!err_file.valid()) return refuse(Refusal::kBadMount, "output: " + error);
  std::vector<UniqueFd> pinned;
  const std::vector<std::string> staged = PinMounts(rt, req, name, &pinned, &error);
  // Staged mounts come down however this ends.
  struct Unpin {
    const RuntimeConfig& rt;
    const std::string& name;
    size_t count;
    ~Unpin() { UnpinMounts(rt, name, count); }
  } unpin{rt, name, req.mounts.size()};
  if (!error.empty()) return refuse(Refusal::kBadMount, error);

  const auto started = Clock::now();
  ClientRun run = RunClient(rt, req, staged, name, client_fd, deadline, {out_file.get(), err_file.get()});
  if (!run.error.empty()) return refuse(Refusal::kRuntimeUnavailable, run.error);
  // The client is gone; with --rm the container should be too. Make sure.
  if (run.ran && run.removed && !ContainerGone(rt, name)) run.removed = RemoveContainer(rt, name, -1).gone;
  const double duration = std::chrono::duration<double>(Clock::now() - started).count();
  out_file.Reset();
  err_file.Reset();
  const std::string unchecked = CheckWrittenMounts(rt, req, pinned);

  nlohmann::ordered_json answer;
  answer["ok"] = true;
  answer["exit_code"] = run.status;
  answer["timed_out"] = run.timed_out;
  answer["stdout_tail"] = run.tails[0];
  answer["stderr_tail"] = run.tails[1];
  answer["stdout_path"] = config.work_dir + "/.oarbank-broker/" + name + ".stdout";
  answer["stderr_path"] = config.work_dir + "/.oarbank-broker/" + name + ".stderr";
  answer["duration_s"] = std::round(duration * 1000) / 1000;
  answer["container"] = name;
  answer["container_removed"] = run.removed;
  answer["work_checked"] = unchecked.empty();
  if (!unchecked.empty()) answer["work_check"] = unchecked;
  return answer;
}

}  // namespace oarbank::broker
