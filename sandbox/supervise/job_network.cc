#include "sandbox/supervise/job_network.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <mutex>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/helper_path.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/common/send_fd.h"
#include "sandbox/common/trust_file.h"
#include "sandbox/egress/job_ruleset.h"
#include "sandbox/supervise/namespaces.h"

namespace oarbank {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStepTimeout = std::chrono::seconds(10);
constexpr size_t kMaxHelperOutput = 1 << 20;

int MillisLeft(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 1 << 30));
}

std::string OneLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

// A generation as the helper answers it: its decimal number (0 < n < 2^32)
// and a newline, nothing else.
std::optional<uint32_t> ParseGeneration(const std::string& answer) {
  if (answer.size() < 2 || answer.back() != '\n') return std::nullopt;
  uint32_t gen = 0;
  const char* end = answer.data() + answer.size() - 1;
  const auto [at, ec] = std::from_chars(answer.data(), end, gen);
  if (ec != std::errc() || at != end || gen == 0 || answer[0] == '0') return std::nullopt;
  return gen;
}

// What a helper wrote to its log (a memfd), as one line; "" if nothing.
std::string LogLine(int log) {
  char buf[2048] = {};
  const ssize_t r = log >= 0 ? pread(log, buf, sizeof buf - 1, 0) : -1;
  return r > 0 ? OneLine(std::string(buf, static_cast<size_t>(r))) : "";
}

// Kills and reaps `pid`, waiting at most `grace` for it to end by itself:
// woken by its pidfd the moment it ends (every job waits here for the
// stack and the helper, which a fixed sleep would round up), or, on a
// kernel without pidfd_open, looking every 2 ms.
void Reap(pid_t pid, std::chrono::milliseconds grace) {
  const auto until = Clock::now() + grace;
  const UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  for (;;) {
    const pid_t r = waitpid(pid, nullptr, WNOHANG | __WALL);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    if (Clock::now() >= until) break;
    if (pidfd.valid()) {
      pollfd p{pidfd.get(), POLLIN, 0};
      (void)poll(&p, 1, MillisLeft(until));
    } else {
      usleep(2000);
    }
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, nullptr, __WALL) < 0 && errno == EINTR) {
  }
}

// In a forked child of a possibly multi-threaded process: system calls only.
[[noreturn]] void ExecWithFds(const char* path, char* const argv[], std::initializer_list<std::pair<int, int>> moves,
                              int keep_upto) {
  static char* const env[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  // Everything first above the targets, then down into place. Just above
  // them, not at a fixed number: under a low RLIMIT_NOFILE a fixed one may
  // be out of reach, and a descriptor that did not move must stop the exec
  // (the stack would otherwise run without its namespace or its log).
  int base = 0;
  for (const auto& [from, to] : moves) base = std::max(base, to + 1);
  int high[8];
  int n = 0;
  for (const auto& [from, to] : moves) {
    if (n == 8) _exit(127);
    high[n] = from < 0 ? -1 : fcntl(from, F_DUPFD, base);
    if (from >= 0 && high[n] < 0) _exit(127);
    ++n;
  }
  n = 0;
  for (const auto& [from, to] : moves) {
    if (high[n] >= 0 && dup2(high[n], to) != to) _exit(127);
    ++n;
  }
  syscall(SYS_close_range, static_cast<unsigned>(keep_upto + 1), ~0u, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(path, argv, env);
  _exit(127);
}

}  // namespace

// oarbank-netfilter, started once per job in the job's namespaces and asked
// over one stream socket (netfilter_main.cc has the requests and answers):
// a socket, not a pipe, so a helper that is gone cannot take the agent
// with it by SIGPIPE. Its stderr goes to a memfd, whose line an Error
// carries. It ends when the socket closes (End), or is killed at a
// deadline; either way it is reaped here.
class NetfilterSession {
 public:
  NetfilterSession() = default;
  ~NetfilterSession() { End(); }
  NetfilterSession(const NetfilterSession&) = delete;
  NetfilterSession& operator=(const NetfilterSession&) = delete;

  // Starts the helper; it waits for the namespaces.
  std::optional<Error> Start(const std::string& helper);
  // Hands it the job's user and network namespaces: the first request.
  std::optional<Error> SendNamespaces(int userns, int netns);
  // Sends `request` (its line, and for apply the ruleset after it); the
  // answers come back in the order of the requests, each to one Receive.
  std::optional<Error> Send(const std::string& request, const std::string& body, Clock::time_point deadline);
  // The answer to the oldest request not yet received, or an Error; after
  // an Error the helper is gone.
  Expected<std::string> Receive(Clock::time_point deadline);
  // Sends `request` and returns its answer; answers still due to earlier
  // requests are read and dropped first.
  Expected<std::string> Ask(const std::string& request, const std::string& body, Clock::time_point deadline) {
    if (auto e = Send(request, body, deadline)) return *e;
    while (asked_.size() > 1)
      if (auto earlier = Receive(deadline); !earlier.ok()) return earlier.error();
    return Receive(deadline);
  }
  // Closes its input (it exits) and reaps it; idempotent.
  void End();
  // Says no request follows: it exits once it has answered those sent.
  void CloseInput() { shutdown(socket_.get(), SHUT_WR); }

 private:
  // Kills and reaps it; the Error names why, with its stderr line if any.
  Error Failed(const std::string& request, const std::string& why);
  bool Await(short events, Clock::time_point deadline);
  std::string helper_;
  pid_t pid_ = -1;
  UniqueFd socket_, log_;
  std::vector<std::string> asked_;  // the requests' words, oldest first, not yet answered
  std::string in_;                  // what came back and is not yet an answer received
};

std::optional<Error> NetfilterSession::Start(const std::string& helper) {
  helper_ = helper;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return Error{"nftables", std::string("socketpair: ") + strerror(errno)};
  socket_.Reset(pair[0]);
  const UniqueFd theirs(pair[1]);
  log_.Reset(static_cast<int>(syscall(SYS_memfd_create, "oarbank-netfilter-log", MFD_CLOEXEC)));
  if (!log_.valid()) return Error{"nftables", std::string("memfd_create: ") + strerror(errno)};
  std::string path = helper;
  char* const argv[] = {path.data(), nullptr};
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // not in the agent's process group: a terminal's ^C is the agent's to handle
    ExecWithFds(path.c_str(), argv, {{theirs.get(), 0}, {theirs.get(), 1}, {log_.get(), 2}}, 2);
  }
  if (pid < 0) return Error{"nftables", std::string("fork: ") + strerror(errno)};
  pid_ = pid;
  return std::nullopt;
}

std::optional<Error> NetfilterSession::SendNamespaces(int userns, int netns) {
  if (pid_ <= 0) return Error{"nftables", helper_ + " namespaces: not running"};
  static constexpr char kLine[] = "namespaces\n";
  const int fds[2] = {userns, netns};
  // The first request: the socket is empty, the line fits at once.
  if (int err = SendFds(socket_.get(), kLine, sizeof kLine - 1, fds, 2))
    return Failed("namespaces", err == EIO ? "sent in part" : std::string("sendmsg: ") + strerror(err));
  asked_.push_back("namespaces");
  return std::nullopt;
}

bool NetfilterSession::Await(short events, Clock::time_point deadline) {
  pollfd p{socket_.get(), events, 0};
  int got;
  do got = poll(&p, 1, MillisLeft(deadline));
  while (got < 0 && errno == EINTR);
  return got > 0;
}

Error NetfilterSession::Failed(const std::string& request, const std::string& why) {
  int status = -1;
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    while (waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  socket_.Reset();
  if (std::string err = LogLine(log_.get()); !err.empty()) return Error{"nftables", err};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return Error{"nftables", "cannot execute " + helper_};
  return Error{"nftables", helper_ + " " + request + ": " + why};
}

std::optional<Error> NetfilterSession::Send(const std::string& request, const std::string& body,
                                            Clock::time_point deadline) {
  const std::string word = request.substr(0, request.find(' '));
  if (pid_ <= 0) return Error{"nftables", helper_ + " " + word + ": not running"};
  const std::string out = request + "\n" + body;
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = send(socket_.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (!Await(POLLOUT, deadline)) return Failed(word, "no answer in time");
    } else {
      return Failed(word, "ended");
    }
  }
  asked_.push_back(word);
  return std::nullopt;
}

Expected<std::string> NetfilterSession::Receive(Clock::time_point deadline) {
  if (asked_.empty()) return Error{"nftables", helper_ + ": no request to answer"};
  const std::string word = asked_.front();
  if (pid_ <= 0) return Error{"nftables", helper_ + " " + word + ": not running"};
  // "ok N\n", then N bytes; what follows is the next request's.
  size_t header = 0, size = 0;
  for (;;) {
    if (const size_t nl = in_.find('\n'); header == 0 && nl != std::string::npos) {
      const std::string_view line(in_.data(), nl);
      const char* digits = line.data() + std::min<size_t>(3, nl);
      const auto [end, ec] = std::from_chars(digits, line.data() + nl, size);
      if (!line.starts_with("ok ") || ec != std::errc() || end != line.data() + nl || size > kMaxHelperOutput)
        return Failed(word, "an answer that is not one: " + OneLine(std::string(line)));
      header = nl + 1;
    }
    if (header != 0 && in_.size() >= header + size) break;
    if (header == 0 && in_.size() > 32) return Failed(word, "an answer that is not one");
    char buf[16384];
    const ssize_t n = recv(socket_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (!Await(POLLIN, deadline)) return Failed(word, "no answer in time");
    } else {
      return Failed(word, n == 0 ? "ended without an answer" : std::string("recv: ") + strerror(errno));
    }
  }
  asked_.erase(asked_.begin());
  if (asked_.empty() && in_.size() != header + size) return Failed(word, "more than its answer");
  std::string answer = in_.substr(header, size);
  in_.erase(0, header + size);
  return answer;
}

void NetfilterSession::End() {
  socket_.Reset();
  if (pid_ > 0) Reap(pid_, std::chrono::milliseconds(2000));
  pid_ = -1;
}

namespace {

// A file the supervisor runs with its own privilege must be one only root
// (or the agent's uid) could have written.
std::optional<std::string> Untrusted(const std::string& path) {
  auto trusted = CheckTrustedFile(path);
  if (!trusted.ok()) return trusted.error().what;
  if (!trusted.value()) return path + " is not installed";
  return std::nullopt;
}

}  // namespace

std::string NetfilterHelperPathFor(const std::string& program) {
  return HelperPathFor(program, "oarbank-netfilter", OARBANK_NETFILTER_HELPER);
}

std::string NetfilterHelperPath() { return NetfilterHelperPathFor("/proc/self/exe"); }

void NameJobNetworkParts(HostFacts::JobNetworkFacts& facts, const std::string& program) {
  facts.stack_path = kJobStackPath;
  facts.helper_path = NetfilterHelperPathFor(program);
}

std::optional<Error> JobNetwork::MakeTap(Clock::time_point step) {
  if (auto e = netfilter_->SendNamespaces(userns_.get(), netns_.get())) return e;
  joined_ = true;
  auto made = netfilter_->Receive(step);
  if (!made.ok()) return made.error();
  if (!made.value().empty()) return Error{"nftables", "the helper's namespaces: an answer where none was due"};
  return std::nullopt;
}

std::optional<Error> JobNetwork::StartRules(const JobNetworkSettings& settings, Clock::time_point step) {
  RulesetInputs inputs;
  inputs.test_public = settings.test_public;
  inputs.host_addresses = HostAddresses();
  // Test-only (oarbank-agent-faulty): every destination but the host's own
  // counts as public, so the battery can show it sees a broken ruleset.
  if (FaultSkipStep("job-ruleset-classes"))
    for (const char* all : {"0.0.0.0/0", "::/0"}) inputs.test_public.push_back(egress::ParseCidr(all).value());
  // Test-only: the host's own addresses are not in the ruleset.
  if (FaultSkipStep("job-ruleset-host-addresses")) inputs.host_addresses.clear();
  const std::string ruleset = RulesetText(inputs);
  return netfilter_->Send("apply " + std::to_string(ruleset.size()), ruleset, step);
}

std::optional<Error> JobNetwork::AwaitRules(Clock::time_point step) {
  auto installed = netfilter_->Receive(step);
  if (!installed.ok()) return installed.error();
  auto gen = ParseGeneration(installed.value());
  if (!gen) return Error{"nftables", "the helper's apply: not a generation: " + OneLine(installed.value())};
  generation_ = *gen;
  return std::nullopt;
}

std::optional<Error> JobNetwork::StartStack() {
  // It tells when tap0 is configured (ready), and exits when exit_w_ closes.
  int ready[2], exit_pipe[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Error{"slirp4netns", std::string("pipe: ") + strerror(errno)};
  stack_ready_.Reset(ready[0]);
  UniqueFd ready_w(ready[1]);
  if (pipe2(exit_pipe, O_CLOEXEC) != 0) return Error{"slirp4netns", std::string("pipe: ") + strerror(errno)};
  UniqueFd exit_r(exit_pipe[0]);
  exit_w_.Reset(exit_pipe[1]);
  stack_log_.Reset(static_cast<int>(syscall(SYS_memfd_create, "slirp4netns-log", MFD_CLOEXEC)));
  const UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  // Fixed fd numbers in the stack: 3 ready, 4 exit, 5 user, 6 net.
  std::vector<std::string> args = {
      kJobStackPath,      "--configure",  "--mtu=65520", "--disable-host-loopback", "--enable-ipv6",
      "--enable-seccomp", "--ready-fd=3", "--exit-fd=4", "--netns-type=path",       "--userns-path=/proc/self/fd/5",
      "/proc/self/fd/6",  "tap0"};
  // --enable-sandbox (an empty root, no capabilities) becomes uid 0 in the
  // job's user namespace, which only a root agent maps there.
  const bool sandboxed = geteuid() == 0;
  if (sandboxed) args.insert(args.begin() + 4, "--enable-sandbox");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();  // not in the agent's process group: a terminal's ^C is the agent's to handle
    // --enable-sandbox pivots into an empty root and detaches the old one;
    // in the host's mount namespace that unmount propagates to every shared
    // mount (/run/netns/*). So the stack gets a mount namespace of its own,
    // everything private, first; without one it does not run.
    if (sandboxed && (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0))
      _exit(126);
    ExecWithFds(kJobStackPath, argv.data(),
                {{devnull.get(), 0},
                 {devnull.get(), 1},
                 {stack_log_.valid() ? stack_log_.get() : devnull.get(), 2},
                 {ready_w.get(), 3},
                 {exit_r.get(), 4},
                 {userns_.get(), 5},
                 {netns_.get(), 6}},
                6);
  }
  const int fork_err = errno;
  ready_w.Reset();
  exit_r.Reset();
  if (pid < 0) return Error{"slirp4netns", std::string("fork: ") + strerror(fork_err)};
  stack_ = pid;
  return std::nullopt;
}

std::optional<Error> JobNetwork::AwaitStack(Clock::time_point step) {
  pollfd p{stack_ready_.get(), POLLIN, 0};
  int got;
  do got = poll(&p, 1, MillisLeft(step));
  while (got < 0 && errno == EINTR);
  char byte = 0;
  const bool ready = got > 0 && read(stack_ready_.get(), &byte, 1) == 1;
  stack_ready_.Reset();
  if (ready) return std::nullopt;
  Stop();
  std::string why = got == 0 ? "not ready in time" : "ended before it was ready";
  if (std::string line = LogLine(stack_log_.get()); !line.empty()) why += ": " + line;
  return Error{"slirp4netns", "the user-mode stack " + std::string(kJobStackPath) + ": " + why};
}

Expected<std::unique_ptr<JobNetwork>> JobNetwork::Prepare() {
  const std::string helper = NetfilterHelperPath();
  if (auto why = Untrusted(helper)) return Error{"nftables", "the helper oarbank-netfilter: " + *why};
  if (auto why = Untrusted(kJobStackPath)) return Error{"slirp4netns", "the user-mode stack: " + *why};
  if (auto why = TunDeviceGap()) return Error{"slirp4netns", "the user-mode stack: " + *why};
  std::unique_ptr<JobNetwork> net(new JobNetwork());
  net->netfilter_ = std::make_unique<NetfilterSession>();
  if (auto e = net->netfilter_->Start(helper)) return *e;
  return net;
}

std::optional<Error> JobNetwork::Start(pid_t init, const JobNetworkSettings& settings, Clock::time_point deadline) {
  if (userns_.valid()) return Error{"network namespace", "the job's network was started already"};
  const std::string ns = "/proc/" + std::to_string(init) + "/ns/";
  userns_.Reset(open((ns + "user").c_str(), O_RDONLY | O_CLOEXEC));
  netns_.Reset(open((ns + "net").c_str(), O_RDONLY | O_CLOEXEC));
  if (!userns_.valid() || !netns_.valid())
    return Error{"network namespace", "open " + ns + "{user,net}: " + strerror(errno)};
  const auto step = std::min(deadline, Clock::now() + kStepTimeout);
  // The stack starts while the helper (started already, loaded while the
  // job's namespaces were made) installs the ruleset (each has a CPU of its
  // own where there are two). Nothing of the job's runs before both are in
  // place: init waits for "go" and is all there is in the namespace, and
  // the gate reads the ruleset's generation back before the module's exec.
  if (auto e = MakeTap(step)) return e;
  if (auto e = StartStack()) return e;
  if (auto e = StartRules(settings, step)) return e;
  if (auto e = AwaitStack(step)) return e;
  if (auto e = AwaitRules(step)) return e;
  // IPv4 is configured; IPv6 follows the stack's router advertisement,
  // which the gate's read-back waits for (Verify).
  return std::nullopt;
}

JobNetwork::~JobNetwork() { Stop(); }

std::string JobNetwork::Verify() {
  if (stack_ <= 0) return "the user-mode stack is not running";
  if (waitpid(stack_, nullptr, WNOHANG | __WALL) == stack_) {
    stack_ = -1;
    return "the user-mode stack ended";
  }
  if (!netfilter_) return "read the ruleset back: the helper is not running";
  auto answer = netfilter_->Ask("generation", "", Clock::now() + kStepTimeout);
  if (!answer.ok()) return "read the ruleset back: " + answer.error().what;
  const auto now = ParseGeneration(answer.value());
  if (!now) return "read the ruleset back: not a generation: " + OneLine(answer.value());
  if (*now != generation_)
    return "the ruleset changed after it was installed (nftables generation " + std::to_string(generation_) +
           " at its install, " + std::to_string(*now) + " now)";
  return "";
}

long long JobNetwork::End() {
  // The stack exits (its exit fd closes) while the helper reads the drop
  // counter; nothing of the job's is left to send a packet.
  exit_w_.Reset();
  long long dropped = -1;
  if (netfilter_ && joined_) {
    // The last request: the helper exits right after its answer, while the
    // answer comes back, rather than once its socket is closed after it.
    const auto deadline = Clock::now() + kStepTimeout;
    if (!netfilter_->Send("dropped", "", deadline)) {
      netfilter_->CloseInput();
      if (auto text = netfilter_->Receive(deadline); text.ok()) dropped = strtoll(text.value().c_str(), nullptr, 10);
    }
  }
  Stop();
  return dropped;
}

void JobNetwork::Stop() {
  netfilter_.reset();
  exit_w_.Reset();
  if (stack_ > 0) Reap(stack_, std::chrono::milliseconds(2000));
  stack_ = -1;
}

HostFacts::JobNetworkFacts SupervisedJobNetworkFacts(bool probe, bool trial) {
  HostFacts::JobNetworkFacts facts;
  facts.supervised = true;
  if (!probe) return facts;
  NameJobNetworkParts(facts);
  const JobNetworkProbe p = trial ? ProbeJobNetwork() : JobNetworkParts();
  facts.ok = p.ok;
  facts.missing = p.missing;
  facts.detail = p.detail;
  return facts;
}

std::optional<std::string> TunDeviceGap(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return path + ": " + strerror(errno) + " (the kernel's tun driver, which the stack's tap device needs)";
  if (!S_ISCHR(st.st_mode)) return path + " is not a character device";
  if (faccessat(AT_FDCWD, path.c_str(), R_OK | W_OK, AT_EACCESS) != 0) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return path + " is mode " + mode + " owned by uid " + std::to_string(st.st_uid) + ": this agent (uid " +
           std::to_string(geteuid()) +
           ") cannot open it for the job's tap device; run the agent as root or make the device 0666";
  }
  return std::nullopt;
}

JobNetworkProbe JobNetworkParts() {
  JobNetworkProbe parts;
  if (auto why = TunDeviceGap()) {
    parts.missing = "the tun device (" + std::string(kTunDevicePath) + ")";
    parts.detail = *why;
  } else if (auto why = Untrusted(kJobStackPath)) {
    parts.missing = "the user-mode stack (slirp4netns)";
    parts.detail = *why;
  } else if (auto why = Untrusted(NetfilterHelperPath())) {
    parts.missing = "nftables (oarbank-netfilter)";
    parts.detail = *why;
  } else {
    parts.ok = true;
    parts.detail = "slirp4netns and oarbank-netfilter are in place (a job's start tries them)";
  }
  return parts;
}

namespace {

// Prepare and Start at once, for a namespace pair that exists already.
Expected<std::unique_ptr<JobNetwork>> StartJobNetwork(pid_t init) {
  auto net = JobNetwork::Prepare();
  if (!net.ok()) return net.error();
  if (auto e = net.value()->Start(init, {}, Clock::now() + kStepTimeout)) return *e;
  return net;
}

}  // namespace

const JobNetworkProbe& ProbeJobNetwork() {
  static JobNetworkProbe probe;
  static std::once_flag once;
  std::call_once(once, [] {
    if (JobNetworkProbe parts = JobNetworkParts(); !parts.ok) {
      probe = parts;
      return;
    }
    // A real attempt on a throw-away namespace pair, by the same code a job uses.
    int sync[2], hold[2];
    if (pipe2(sync, O_CLOEXEC) != 0) return;
    if (pipe2(hold, O_CLOEXEC) != 0) {
      close(sync[0]), close(sync[1]);
      return;
    }
    const pid_t child = fork();
    if (child == 0) {
      close(sync[0]);
      close(hold[1]);
      char ok = unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 'u' : 'x';
      (void)!write(sync[1], &ok, 1);
      char c;
      (void)!read(hold[0], &c, 1);  // until the parent is done
      _exit(0);
    }
    close(sync[1]);
    close(hold[0]);
    UniqueFd sync_r(sync[0]), hold_w(hold[1]);
    char state = 0;
    if (child < 0 || read(sync_r.get(), &state, 1) != 1 || state != 'u') {
      probe.missing = "user namespaces";
      probe.detail = "unshare(CLONE_NEWUSER|CLONE_NEWNET) refused";
    } else {
      const char* what = "";
      if (int err = WriteIdMapsFromParent(child, PlanIdMaps(geteuid(), getegid(), std::nullopt, std::nullopt), &what)) {
        probe.missing = "user namespaces";
        probe.detail = std::string("write ") + what + ": " + strerror(err);
      } else if (auto net = StartJobNetwork(child); !net.ok()) {
        probe.missing = net.error().where == "slirp4netns" ? "the user-mode stack (slirp4netns)"
                        : net.error().where == "nftables"  ? "nftables (oarbank-netfilter)"
                                                           : net.error().where;
        probe.detail = net.error().what;
      } else if (std::string why = net.value()->Verify(); !why.empty()) {
        probe.missing = "nftables (oarbank-netfilter)";
        probe.detail = why;
      } else {
        probe.ok = true;
        probe.detail = "slirp4netns and an nftables ruleset (oarbank-netfilter) in a fresh user and network namespace";
      }
    }
    hold_w.Reset();
    if (child > 0) Reap(child, std::chrono::milliseconds(2000));
  });
  return probe;
}

}  // namespace oarbank
