#include "sandbox/broker/server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <climits>
#include <cstring>
#include <set>

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank::broker {
namespace {

int g_signal_pipe = -1;

bool Inside(const std::string& path, const std::string& dir) {
  return !dir.empty() && (path == dir || path.rfind(dir + "/", 0) == 0);
}

void OnSignal(int sig) {
  const char c = static_cast<char>(sig);
  (void)!write(g_signal_pipe, &c, 1);
}

std::string Canonical(const std::string& path, const char* what, std::string* error) {
  char buf[PATH_MAX];
  if (path.empty() || path.front() != '/') {
    *error = std::string(what) + ": expected an absolute path, got \"" + path + "\"";
    return "";
  }
  if (realpath(path.c_str(), buf) == nullptr) {
    *error = std::string(what) + ": " + path + ": " + strerror(errno);
    return "";
  }
  struct stat st {};
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = std::string(what) + ": " + path + " is not a directory";
    return "";
  }
  return buf;
}

bool SendAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

nlohmann::ordered_json Status(const Broker& broker) {
  nlohmann::ordered_json s;
  s["ok"] = true;
  std::string why;
  const auto running = JobContainers(broker.runtime, /*running_only=*/true, &why);
  if (!running) return RefusalJson({Refusal::kRuntimeUnavailable, why});
  s["running"] = running->size();
  s["images"] = nlohmann::ordered_json::array();
  for (const auto& img : broker.config.images)
    s["images"].push_back({{"image", img.reference},
                           {"platform", img.platform},
                           {"present", ImagePresent(broker.runtime, img.reference)}});
  s["runtime"] = broker.probe.detail;
  if (broker.ledger != nullptr) {
    const auto [quota, memory] = Reserved(broker.ledger);
    s["reserved"] = {{"cpus", static_cast<double>(quota) / kCpuPeriodUs},
                     {"mem_gb", static_cast<double>(memory) / (1 << 30)}};
  }
  return s;
}

}  // namespace

namespace {

// The job's reservation (cpus, memory, the longest timeout) and its
// network grant; "" or the option that is wrong.
std::string CheckReservation(const BrokerArgs& args, Broker& b) {
  if (!(args.cpus >= kMinCpus && args.cpus <= 4096))
    return "--cpus: expected a number of CPUs from 0.01 (the smallest CFS quota) to 4096";
  if (!(args.mem_gb > 0 && args.mem_gb <= 1 << 20) || MemoryBytes(args.mem_gb) == 0)
    return "--mem-gb: expected a number of GiB from 6 MiB (the least Podman accepts) to 1048576";
  if (!(args.max_timeout_s >= kMinTimeoutS && args.max_timeout_s <= 1e7))
    return "--max-timeout: expected a number of seconds from 1 to 10000000";
  b.config.cpus = args.cpus;
  b.config.mem_gb = args.mem_gb;
  b.config.max_timeout_s = args.max_timeout_s;
  b.config.network_granted = args.network_granted;
  // Containers never get Podman's bridge: a network grant is the job's own
  // network namespace, or nothing.
  if (args.network_granted && (args.job_netns.empty() || args.job_netns.front() != '/'))
    return "--network-granted: needs --job-netns PATH, the job's network namespace (run --publish-netns): "
           "containers join it, never Podman's bridge";
  if (!args.network_granted && (!args.job_netns.empty() || args.job_proxy_port != 0))
    return "--job-netns, --job-proxy-port: only with --network-granted";
  if (args.job_proxy_port < 0 || args.job_proxy_port > 65535) return "--job-proxy-port: expected 1..65535";
  b.runtime.job_netns = args.job_netns;
  if (args.job_proxy_port > 0) b.runtime.job_proxy = "http://127.0.0.1:" + std::to_string(args.job_proxy_port);
  return "";
}

// The broker's own socket: absolute, short enough, and never inside what a
// container may mount.
std::string CheckSocketPath(const BrokerArgs& args, Broker& b) {
  if (args.socket_path.empty() || args.socket_path.front() != '/' ||
      args.socket_path.size() >= sizeof(sockaddr_un::sun_path))
    return "--socket: expected an absolute path shorter than " + std::to_string(sizeof(sockaddr_un::sun_path)) +
           " bytes";
  {
    const auto slash = args.socket_path.rfind('/');
    char parent[PATH_MAX];
    const std::string dir = slash == 0 ? "/" : args.socket_path.substr(0, slash);
    if (realpath(dir.c_str(), parent) == nullptr) return "--socket: " + dir + ": " + strerror(errno);
    const std::string where = std::string(parent) + "/" + args.socket_path.substr(slash + 1);
    if (Inside(where, b.config.work_dir) || Inside(where, b.config.data_dir))
      return "--socket: " + where + " is inside the work or data directory, which containers may mount";
  }
  return "";
}

// The job's identity, the state directory and the runtime (Podman and
// runc on PATH, their configuration written).
std::string PrepareRuntime(const BrokerArgs& args, Broker& b) {
  if (args.subid_registry.empty() || args.subid_registry.front() != '/')
    return "--subid-registry: expected an absolute path";
  b.subid_registry = args.subid_registry;
  struct stat work {};
  stat(b.config.work_dir.c_str(), &work);
  b.runtime.job_uid = args.job_uid >= 0 ? static_cast<uid_t>(args.job_uid) : work.st_uid;
  b.runtime.job_gid = args.job_gid >= 0 ? static_cast<gid_t>(args.job_gid) : work.st_gid;
  b.runtime.job_id = args.job_id;
  if (args.state_dir.empty() || args.state_dir.front() != '/') return "--state-dir: expected an absolute path";
  mkdir(args.state_dir.c_str(), 0700);
  std::string error;
  b.runtime.state_dir = Canonical(args.state_dir, "--state-dir", &error);
  if (!error.empty()) return error;
  // Podman refuses a runroot longer than 50 bytes (conmon's socket paths).
  if (b.runtime.state_dir.size() + 10 > 50)
    return "--state-dir: " + b.runtime.state_dir + " is too long: podman needs <state>/j<slot>/run within 50 bytes";
  const char* path = getenv("PATH");
  b.probe = ProbeRuntime(path ? path : "");
  b.runtime.podman = b.probe.podman;
  b.runtime.runc = b.probe.runc;
  b.runtime.container_init = b.probe.container_init;
  if (b.probe.available) {
    if (std::string failed = PrepareState(b.runtime); !failed.empty()) {
      b.probe.available = false;
      b.probe.detail = "state directory: " + failed;
    }
  }
  return "";
}

}  // namespace

std::variant<Broker, std::string> MakeBroker(const BrokerArgs& args) {
  Broker b;
  std::string error;
  b.config.work_dir = Canonical(args.work_dir, "--work", &error);
  if (!error.empty()) return error;
  if (!args.data_dir.empty()) {
    b.config.data_dir = Canonical(args.data_dir, "--data", &error);
    if (!error.empty()) return error;
  }
  b.config.host_platform = HostPlatform();
  for (const auto& spec : args.images) {
    const auto eq = spec.rfind('=');
    const std::string ref = spec.substr(0, eq);
    const std::string platform = eq == std::string::npos ? "" : spec.substr(eq + 1);
    if (!IsDigestPinned(ref))
      return "--image: " + ref + ": expected a digest-pinned reference name@sha256:<64 lowercase hex>";
    if (!IsPlatform(platform)) return "--image: " + spec + ": expected REF=os/arch, e.g. =linux/amd64";
    b.config.images.push_back({ref, platform});
  }
  if (!IsJobId(args.job_id)) return "--job: expected 1 to 64 of [A-Za-z0-9_.-], got \"" + args.job_id + "\"";
  for (auto* stage : {CheckReservation, CheckSocketPath, PrepareRuntime})
    if (std::string why = stage(args, b); !why.empty()) return why;
  return b;
}

struct Ledger {
  pthread_mutex_t mutex;
  struct Slot {
    pid_t pid;
    long long quota_us;
    long long memory;
  } slots[kMaxConnections * 2];
};

Ledger* MakeLedger() {
  void* p = mmap(nullptr, sizeof(Ledger), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* ledger = static_cast<Ledger*>(p);
  memset(ledger, 0, sizeof *ledger);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  const bool ok = pthread_mutex_init(&ledger->mutex, &attr) == 0;
  pthread_mutexattr_destroy(&attr);
  if (!ok) {
    munmap(p, sizeof(Ledger));
    return nullptr;
  }
  return ledger;
}

namespace {
void Lock(Ledger* ledger) {
  // A handler killed while holding it leaves it consistent: every update is
  // one slot, written whole.
  if (pthread_mutex_lock(&ledger->mutex) == EOWNERDEAD) pthread_mutex_consistent(&ledger->mutex);
}
}  // namespace

std::string Reserve(Ledger* ledger, pid_t pid, long long cpu_quota_us, long long memory_bytes, long long total_quota_us,
                    long long total_memory_bytes) {
  Lock(ledger);
  long long quota = 0, memory = 0;
  int running = 0;
  Ledger::Slot* free_slot = nullptr;
  for (auto& slot : ledger->slots) {
    if (slot.pid == 0) {
      if (free_slot == nullptr) free_slot = &slot;
      continue;
    }
    quota += slot.quota_us;
    memory += slot.memory;
    ++running;
  }
  std::string why;
  char buf[256];
  if (quota + cpu_quota_us > total_quota_us) {
    snprintf(buf, sizeof buf, "cpus: %.5g asked, %.5g of the job's %.5g free (%d request(s) running)",
             static_cast<double>(cpu_quota_us) / kCpuPeriodUs,
             static_cast<double>(total_quota_us - quota) / kCpuPeriodUs,
             static_cast<double>(total_quota_us) / kCpuPeriodUs, running);
    why = buf;
  } else if (memory + memory_bytes > total_memory_bytes) {
    snprintf(buf, sizeof buf, "mem_gb: %.6g asked, %.6g of the job's %.6g free (%d request(s) running)",
             static_cast<double>(memory_bytes) / (1 << 30),
             static_cast<double>(total_memory_bytes - memory) / (1 << 30),
             static_cast<double>(total_memory_bytes) / (1 << 30), running);
    why = buf;
  } else if (free_slot == nullptr) {
    why = "connections: every reservation slot is taken";
  } else {
    *free_slot = {pid, cpu_quota_us, memory_bytes};
  }
  pthread_mutex_unlock(&ledger->mutex);
  return why;
}

std::pair<long long, long long> Reserved(Ledger* ledger) {
  Lock(ledger);
  long long quota = 0, memory = 0;
  for (const auto& slot : ledger->slots)
    if (slot.pid != 0) {
      quota += slot.quota_us;
      memory += slot.memory;
    }
  pthread_mutex_unlock(&ledger->mutex);
  return {quota, memory};
}

void Release(Ledger* ledger, pid_t pid) {
  if (ledger == nullptr) return;
  Lock(ledger);
  for (auto& slot : ledger->slots)
    if (slot.pid == pid) slot = {0, 0, 0};
  pthread_mutex_unlock(&ledger->mutex);
}

nlohmann::ordered_json Answer(const Broker& broker, std::string_view line, int client_fd) {
  const auto accepted = std::chrono::steady_clock::now();
  Parsed parsed = ParseRequest(line, broker.config);
  if (auto* refused = std::get_if<Refused>(&parsed)) return RefusalJson(*refused);
  if (!broker.probe.available) return RefusalJson({Refusal::kRuntimeUnavailable, broker.probe.detail});
  Request& request = std::get<Request>(parsed);
  if (auto* run = std::get_if<RunRequest>(&request)) {
    if (broker.ledger == nullptr)
      return RefusalJson({Refusal::kRuntimeUnavailable, "the broker keeps no reservation ledger"});
    const std::string why = Reserve(broker.ledger, getpid(), run->cpu_quota_us, run->memory_bytes,
                                    CpuQuotaUs(broker.config.cpus), MemoryBytes(broker.config.mem_gb));
    if (!why.empty()) return RefusalJson({Refusal::kReservationExhausted, why});
    auto answer = RunContainer(broker.runtime, broker.config, *run, client_fd, accepted);
    // A container that outlived every removal keeps its share of the
    // reservation: nothing else may be granted what it may still use.
    if (answer.value("container_removed", true)) Release(broker.ledger, getpid());
    return answer;
  }
  if (auto* pull = std::get_if<PullRequest>(&request)) {
    if (ImagePresent(broker.runtime, pull->image)) return {{"ok", true}};
    return RefusalJson(
        {Refusal::kRuntimeUnavailable,
         "image: " + pull->image + " is not in the agent's image store, and the broker never pulls from a registry"});
  }
  return Status(broker);
}

void ServeConnection(const Broker& broker, int fd) {
  std::string buffer;
  char chunk[8192];
  for (;;) {
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      if (!SendAll(fd, AnswerLine(Answer(broker, line, fd)))) return;
    }
    if (buffer.size() > kMaxRequestBytes) {
      // No way to find the next request: answer and hang up.
      SendAll(fd, AnswerLine(RefusalJson(
                      {Refusal::kBadRequest, "request: longer than " + std::to_string(kMaxRequestBytes) + " bytes"})));
      return;
    }
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A last request without its newline is still a request.
      if (!buffer.empty()) SendAll(fd, AnswerLine(Answer(broker, buffer, fd)));
      return;
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

namespace {

// The watchdog (sandbox/broker/server.h): waits for the broker's end, then removes what
// the job left. Never returns.
[[noreturn]] void Watchdog(const Broker& broker, int watch) {
  setsid();
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2}) signal(sig, SIG_IGN);
  signal(SIGCHLD, SIG_DFL);
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
  }
  // stderr stays, for what fails; nothing else of the broker's.
  for (int fd = 3; fd < 1024; ++fd)
    if (fd != watch) close(fd);
  char c;
  for (;;) {
    const ssize_t n = read(watch, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  // Forked before the lease was taken: the registry says which range (and
  // so which storage root) is this watchdog's.
  Broker job = broker;
  if (auto live = LiveSubidLeases(broker.subid_registry); live.ok())
    for (const auto& lease : live.value())
      if (lease.pid == getpid()) job.runtime.subid_base = lease.base();
  if (job.probe.available && job.runtime.subid_base != 0) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(kWatchdogGraceS * 1000));
    // A podman client killed with its handler may still be finishing a
    // container: two passes in a row must find none.
    // A pass Podman could not answer is not an empty one.
    int empty = 0;
    std::string why;
    while (empty < 2 && std::chrono::steady_clock::now() < deadline) {
      const auto ids = JobContainers(job.runtime, false, &why);
      if (ids && ids->empty()) {
        ++empty;
      } else {
        empty = 0;
        if (std::string failed = ids ? RemoveJobContainers(job.runtime) : why; !failed.empty())
          fprintf(stderr, "broker watchdog: %s\n", failed.c_str());
      }
      if (empty < 2) usleep(50000);
    }
    if (empty < 2)
      fprintf(stderr, "broker watchdog: containers of job %s may have survived its broker: %s\n",
              job.runtime.job_id.c_str(), why.empty() ? "they outlived every removal" : why.c_str());
  }
  RemoveStaging(job.runtime);
  if (job.runtime.subid_base != 0)
    if (std::string failed = ReleaseSubids(broker.subid_registry, getpid()); !failed.empty())
      fprintf(stderr, "broker watchdog: %s\n", failed.c_str());
  _exit(0);
}

}  // namespace

namespace {

int ExitStatusOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The watchdog first, before any other fd exists: it must hold nothing but
// its end of a pipe whose other end (`watch`, the broker's) closes when the
// broker ends, however it ends. Its pid, or -1.
pid_t StartWatchdog(const Broker& broker, UniqueFd& watch) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return -1;
  UniqueFd read_end(ends[0]);
  watch.Reset(ends[1]);
  fflush(stdout);
  fflush(stderr);
  const pid_t watchdog = fork();
  if (watchdog == 0) {
    watch.Reset();
    Watchdog(broker, read_end.get());
  }
  return watchdog;
}

// The job's subordinate id range, leased in the watchdog's name (it frees
// it), and the job's own storage; or the runtime is unavailable, and says why.
void LeaseSubids(Broker& broker, pid_t watchdog) {
  if (!broker.probe.available) return;
  auto lease = AcquireSubids(broker.subid_registry, broker.runtime.job_id, watchdog);
  if (!lease.ok()) {
    broker.probe.available = false;
    broker.probe.detail = "subordinate ids: " + lease.error().where + ": " + lease.error().what;
    return;
  }
  broker.runtime.subid_base = lease.value().base();
  if (std::string failed = PrepareSlot(broker.runtime); !failed.empty()) {
    broker.probe.available = false;
    broker.probe.detail = "job storage: " + failed;
  }
}

// The parent (the agent) dying stops the broker, and with it the
// containers; SIGTERM, SIGINT, SIGHUP and SIGCHLD arrive on `signals`.
bool CatchSignals(UniqueFd& signals) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  int ends[2];
  if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  signals.Reset(ends[0]);
  g_signal_pipe = ends[1];  // the handler's, for the broker's lifetime
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return true;
}

// The job's socket at --socket (0600, the job's own), listening; or the
// exit status after one line.
std::variant<UniqueFd, int> Listen(const BrokerArgs& args, const Broker& broker) {
  UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", args.socket_path.c_str());
  struct stat existing {};
  if (lstat(args.socket_path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      fprintf(stderr, "broker: --socket: %s exists and is not a socket\n", args.socket_path.c_str());
      return kExitUsage;
    }
    unlink(args.socket_path.c_str());
  }
  const mode_t old_mask = umask(0177);
  const bool bound = listener.valid() && bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  umask(old_mask);
  if (!bound || chown(args.socket_path.c_str(), broker.runtime.job_uid, broker.runtime.job_gid) != 0 ||
      listen(listener.get(), 64) != 0) {
    fprintf(stderr, "broker: socket %s: %s\n", args.socket_path.c_str(), strerror(errno));
    return kExitNotEnforced;
  }
  return listener;
}

// The job's command, when one is given: its pid, or -1.
pid_t StartJob(const BrokerArgs& args, int listener) {
  if (args.job_argv.empty()) return -1;
  const pid_t job = fork();
  if (job == 0) {
    close(listener);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    std::vector<char*> argv;
    for (const auto& a : args.job_argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fprintf(stderr, "broker: %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return job;
}

// One connection: a handler process of its own, or a refusal when
// kMaxConnections are open.
void Accept(Broker& broker, int listener, std::set<pid_t>& handlers) {
  const UniqueFd client(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!client.valid()) return;
  if (handlers.size() >= kMaxConnections) {
    const std::string busy = AnswerLine(RefusalJson(
        {Refusal::kBadRequest, "broker: " + std::to_string(kMaxConnections) + " connections already open"}));
    (void)!send(client.get(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(listener);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    ServeConnection(broker, client.get());
    _exit(0);
  }
  if (pid > 0) handlers.insert(pid);
}

// Serves connections until a signal to stop, the job's end or the
// watchdog's; the job's exit status (0 without a job), and `job` -1 once it
// was reaped, `watchdog` -1 once it was (it died first: see Shutdown).
int Serve(Broker& broker, int listener, int signals, pid_t& job, pid_t& watchdog, std::set<pid_t>& handlers) {
  int job_status = 0;
  for (bool stop = false; !stop;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {signals, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) {
      char sigs[64];
      const ssize_t n = read(signals, sigs, sizeof sigs);
      for (ssize_t i = 0; i < n; ++i)
        if (sigs[i] != SIGCHLD) stop = true;
      int status = 0;
      for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
        handlers.erase(pid);
        Release(broker.ledger, pid);
        if (pid == job) {
          job_status = ExitStatusOf(status);
          job = -1;
          stop = true;
        }
        if (pid == watchdog) {
          watchdog = -1;
          stop = true;
        }
      }
    }
    if (!stop && (p[0].revents & POLLIN)) Accept(broker, listener, handlers);
  }
  return job_status;
}

// The job is over: nothing it started may outlive it. Handlers first (their
// podman clients die with them), so none starts a container after the
// removal; then the staging points; then the watchdog, told by `watch`
// closing, checks again and frees the job's subordinate ids, waited for
// (bounded) so they are free on exit. The broker's exit status.
//
// A watchdog that died first (`watchdog` -1: killed, it ignores every
// other signal) ends the job the same way, with 70: the broker would
// otherwise run containers that nothing removes if it died too, under a
// subordinate id range whose lease died with its owner and may be leased
// to the next job.
int Shutdown(const BrokerArgs& args, Broker& broker, pid_t job, int job_status, const std::set<pid_t>& handlers,
             UniqueFd& watch, pid_t watchdog) {
  unlink(args.socket_path.c_str());
  const bool watchdog_died = watchdog < 0;
  if (watchdog_died) fprintf(stderr, "broker: its watchdog died: the job is stopped and its containers removed\n");
  if (job > 0) {
    kill(job, SIGTERM);
    int status = 0;
    if (waitpid(job, &status, 0) == job) job_status = ExitStatusOf(status);
  }
  int result = job_status;
  for (pid_t pid : handlers) kill(pid, SIGKILL);
  for (pid_t pid : handlers) waitpid(pid, nullptr, 0);
  if (broker.probe.available) {
    if (std::string failed = RemoveJobContainers(broker.runtime); !failed.empty()) {
      fprintf(stderr, "broker: %s\n", failed.c_str());
      result = result != 0 ? result : kExitNotEnforced;
    }
  }
  // Staging points of killed handlers: their binds lived in the handlers'
  // own mount namespaces, so only empty directories and files remain here,
  // in this job's own staging directory.
  RemoveStaging(broker.runtime);
  watch.Reset();
  if (watchdog_died) return kExitNotEnforced;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long long>((kWatchdogGraceS + 30) * 1000));
  for (;;) {
    const pid_t r = waitpid(watchdog, nullptr, WNOHANG);
    if (r == watchdog || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fprintf(stderr, "broker: the watchdog did not finish within %g s\n", kWatchdogGraceS + 30);
      break;
    }
    usleep(20000);
  }
  return result;
}

}  // namespace

int BrokerMain(const BrokerArgs& args) {
  auto made = MakeBroker(args);
  if (auto* error = std::get_if<std::string>(&made)) {
    fprintf(stderr, "broker: %s\n", error->c_str());
    return kExitUsage;
  }
  Broker& broker = std::get<Broker>(made);
  UniqueFd watch;
  pid_t watchdog = StartWatchdog(broker, watch);
  if (watchdog < 0) return kExitNotEnforced;
  LeaseSubids(broker, watchdog);
  broker.ledger = MakeLedger();
  if (!broker.probe.available) fprintf(stderr, "broker: runtime_unavailable: %s\n", broker.probe.detail.c_str());
  UniqueFd signals;
  if (!CatchSignals(signals)) return kExitNotEnforced;
  auto listening = Listen(args, broker);
  if (auto* rc = std::get_if<int>(&listening)) return *rc;
  UniqueFd listener = std::move(std::get<UniqueFd>(listening));

  // Before the job starts, so the banner is the first line of the output.
  printf("broker: listening on %s for job %s\n", args.socket_path.c_str(), args.job_id.c_str());
  fflush(stdout);
  pid_t job = StartJob(args, listener.get());
  std::set<pid_t> handlers;
  const int job_status = Serve(broker, listener.get(), signals.get(), job, watchdog, handlers);
  listener.Reset();
  return Shutdown(args, broker, job, job_status, handlers, watch, watchdog);
}

nlohmann::ordered_json ContainerRuntimeReport() {
  const char* path = getenv("PATH");
  const RuntimeProbe probe = ProbeRuntime(path ? path : "");
  nlohmann::ordered_json r;
  r["runtime"] = "podman";
  r["status"] = probe.available ? "available" : "runtime_unavailable";
  r["detail"] = probe.detail;
  return r;
}

}  // namespace oarbank::broker
