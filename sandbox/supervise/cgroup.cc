#include "sandbox/supervise/cgroup.h"

#include "sandbox/common/write_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

namespace oarbank {
namespace {

constexpr char kSupervisorLeaf[] = "oarbank-supervisor";
constexpr char kJobPrefix[] = "oarbank-job-";
constexpr int kSettleMillis = 2000;  // how long Freeze and Remove wait for the kernel

void SleepMillis(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Writes `text` to dir/name. Returns 0 or errno. No allocation.
int WriteAt(const char* dir, const char* name, const char* text) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= static_cast<int>(sizeof path)) return ENAMETOOLONG;
  return WriteWholeFile(path, text);
}

// Reads dir/name into buf (NUL-terminated). Returns bytes or -1.
ssize_t ReadAt(const char* dir, const char* name, char* buf, size_t size) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= static_cast<int>(sizeof path)) return -1;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t total = 0, n;
  while (total < static_cast<ssize_t>(size) - 1 && (n = read(fd, buf + total, size - 1 - total)) > 0) total += n;
  close(fd);
  buf[total] = '\0';
  return total;
}

// The value of "key N" in a flat-keyed cgroup file, or -1.
long KeyedValue(const char* text, const char* key) {
  const size_t len = strlen(key);
  for (const char* line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : nullptr) {
    if (strncmp(line, key, len) == 0 && line[len] == ' ') return atol(line + len + 1);
  }
  return -1;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

bool HasWord(const std::string& text, const std::string& word) {
  size_t pos = 0;
  while ((pos = text.find(word, pos)) != std::string::npos) {
    const bool start = pos == 0 || text[pos - 1] == ' ' || text[pos - 1] == '\n';
    const size_t end = pos + word.size();
    if (start && (end == text.size() || text[end] == ' ' || text[end] == '\n')) return true;
    pos = end;
  }
  return false;
}

std::string ReadText(const std::string& path) {
  char buf[4096];
  const auto slash = path.rfind('/');
  if (ReadAt(path.substr(0, slash).c_str(), path.substr(slash + 1).c_str(), buf, sizeof buf) < 0) return "";
  return buf;
}

// Whether this process sits in `base` itself and `base` is not the
// hierarchy's root (the one cgroup without cgroup.type, which the
// no-internal-process rule exempts).
bool SitsInNonRootBase(const std::string& base) {
  return Exists(base + "/cgroup.type") && HasWord(ReadText(base + "/cgroup.procs"), std::to_string(getpid()));
}

// Moves the whole process into its own leaf below `base`.
std::optional<std::string> MoveIntoOwnLeaf(const std::string& base) {
  const std::string own = base + "/" + kSupervisorLeaf;
  if (mkdir(own.c_str(), 0755) != 0 && errno != EEXIST) return "mkdir " + own + ": " + strerror(errno);
  char pid[24];
  snprintf(pid, sizeof pid, "%d", static_cast<int>(getpid()));
  int e = WriteAt(own.c_str(), "cgroup.procs", pid);
  if (e == EOPNOTSUPP)
    return "move the agent into " + own + ": " + strerror(e) + " (" + base +
           " gives its leaves a threaded controller while holding this process, which makes it a thread root: "
           "start the agent in a leaf of its own below it, e.g. systemd's DelegateSubgroup=" +
           kSupervisorLeaf + ")";
  if (e != 0) return "move the agent into " + own + ": " + strerror(e);
  return std::nullopt;
}

// Gives `controllers` to the leaves below `base`, moving this process out
// of `base` first when the kernel's rules ask for it: a domain controller
// (memory, cpu) cannot be enabled while `base` holds a process (EBUSY), and
// a threaded one (pids) can, but then `base` is a thread root whose domain
// children take no process (EOPNOTSUPP when a job's init is moved there).
// So an agent in a non-root `base` that has or gets any controller for its
// leaves moves into a leaf of its own first. Once per process and
// controller set; serialised.
std::optional<std::string> EnableControllers(const std::string& base, const LeafLimits& limits) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::string want;
  const std::string enabled = ReadText(base + "/cgroup.subtree_control");
  for (const auto& [needed, name] :
       {std::pair{limits.needs_memory(), "memory"}, {limits.needs_cpu(), "cpu"}, {limits.pids_available, "pids"}}) {
    if (needed && !HasWord(enabled, name)) want += std::string(want.empty() ? "+" : " +") + name;
  }
  const bool controlled = !want.empty() || enabled.find_first_not_of(" \n") != std::string::npos;
  if (controlled && SitsInNonRootBase(base)) {
    if (auto e = MoveIntoOwnLeaf(base)) return e;
  }
  if (want.empty()) return std::nullopt;
  int err = WriteAt(base.c_str(), "cgroup.subtree_control", want.c_str());
  if (err == EBUSY) {
    // This process sat in `base` unseen (a cgroup.procs longer than one
    // read): move it and try once more.
    if (auto e = MoveIntoOwnLeaf(base)) return e;
    err = WriteAt(base.c_str(), "cgroup.subtree_control", want.c_str());
  }
  if (err != 0) return "write \"" + want + "\" to " + base + "/cgroup.subtree_control: " + strerror(err);
  return std::nullopt;
}

}  // namespace

CgroupDelegation DetectCgroupDelegation(const CgroupFacts& facts) {
  CgroupDelegation d;
  if (!facts.v2_mounted) {
    d.detail = "no cgroup v2 hierarchy is mounted";
    return d;
  }
  if (facts.own_path.empty()) {
    d.detail = "this process has no cgroup v2 path";
    return d;
  }
  d.base = facts.own_path;
  // A supervisor that already moved itself into its own leaf: the
  // delegation is the parent.
  const std::string suffix = std::string("/") + kSupervisorLeaf;
  if (d.base.size() > suffix.size() && d.base.compare(d.base.size() - suffix.size(), suffix.size(), suffix) == 0)
    d.base.resize(d.base.size() - suffix.size());
  if (!facts.writable) {
    d.detail = d.base + " is not delegated to this process (not writable)";
    return d;
  }
  d.usable = true;
  d.memory = std::find(facts.controllers.begin(), facts.controllers.end(), "memory") != facts.controllers.end();
  d.cpu = std::find(facts.controllers.begin(), facts.controllers.end(), "cpu") != facts.controllers.end();
  d.pids = std::find(facts.controllers.begin(), facts.controllers.end(), "pids") != facts.controllers.end();
  std::string controllers;
  for (const auto& c : facts.controllers) controllers += (controllers.empty() ? "" : " ") + c;
  d.detail = "leaves below " + d.base + " (controllers: " + (controllers.empty() ? "none" : controllers) + ")";
  return d;
}

LeafLimits PlanLeafLimits(const Limits& limits, bool hard_limits, bool pids_controller) {
  LeafLimits out;
  out.pids_max = limits.pids;
  out.pids_available = pids_controller;
  if (!hard_limits) return out;
  out.pids_required = limits.pids_set;
  if (limits.mem_gb) out.memory_max = static_cast<uint64_t>(std::llround(*limits.mem_gb * 1024.0 * 1024.0 * 1024.0));
  if (limits.cpus)
    out.cpu_quota = std::max<uint64_t>(1000, static_cast<uint64_t>(std::llround(*limits.cpus * out.cpu_period)));
  return out;
}

std::string DescribeLeafLimits(const LeafLimits& limits) {
  std::string out;
  if (limits.memory_max) out += "memory.max=" + std::to_string(*limits.memory_max);
  if (limits.cpu_quota)
    out += std::string(out.empty() ? "" : " ") + "cpu.max=" + std::to_string(*limits.cpu_quota) + " " +
           std::to_string(limits.cpu_period);
  out += std::string(out.empty() ? "" : " ") +
         (limits.pids_available ? "pids.max=" + std::to_string(limits.pids_max) : std::string("pids.max unavailable"));
  return out;
}

Expected<CgroupLeaf> CgroupLeaf::Prepare(const CgroupDelegation& d, const LeafLimits& limits) {
  if (!d.usable) return Error{"process.container", "no cgroup v2 leaf: " + d.detail};
  if (limits.needs_memory() && !d.memory)
    return Error{"limits.memory", "memory.max needs the memory controller; " + d.base + " offers none"};
  if (limits.needs_cpu() && !d.cpu)
    return Error{"limits.cpu", "cpu.max needs the cpu controller; " + d.base + " offers none"};
  LeafLimits wanted = limits;
  wanted.pids_available = limits.pids_available && d.pids;
  if (auto e = EnableControllers(d.base, wanted)) return Error{"process.container", *e};

  static std::atomic<unsigned> sequence{0};
  CgroupLeaf leaf;
  leaf.path_ = d.base + "/" + kJobPrefix + std::to_string(getpid()) + "-" + std::to_string(++sequence);
  if (limits.memory_max) leaf.memory_max_ = std::to_string(*limits.memory_max);
  if (limits.cpu_quota) leaf.cpu_max_ = std::to_string(*limits.cpu_quota) + " " + std::to_string(limits.cpu_period);
  if (wanted.pids_available) leaf.pids_max_ = std::to_string(limits.pids_max);
  return leaf;
}

int CgroupLeaf::Make(const char** field, const char** file) const {
  *field = "process.container";
  *file = "";
  if (mkdir(path_.c_str(), 0755) != 0) return errno;
  auto fail = [&](const char* which_field, const char* which_file, int err) {
    rmdir(path_.c_str());
    *field = which_field;
    *file = which_file;
    return err;
  };
  const char* dir = path_.c_str();
  if (!memory_max_.empty()) {
    if (int e = WriteAt(dir, "memory.max", memory_max_.c_str())) return fail("limits.memory", "memory.max", e);
    // An OOM kill takes the whole job, never one process of it.
    if (int e = WriteAt(dir, "memory.oom.group", "1")) return fail("limits.memory", "memory.oom.group", e);
    // With swap the limit would only move pages to disk.
    char swap[4096];
    snprintf(swap, sizeof swap, "%s/memory.swap.max", dir);
    if (access(swap, F_OK) == 0)
      if (int e = WriteAt(dir, "memory.swap.max", "0")) return fail("limits.memory", "memory.swap.max", e);
  }
  if (!cpu_max_.empty())
    if (int e = WriteAt(dir, "cpu.max", cpu_max_.c_str())) return fail("limits.cpu", "cpu.max", e);
  if (!pids_max_.empty())
    if (int e = WriteAt(dir, "pids.max", pids_max_.c_str())) return fail("limits.pids", "pids.max", e);
  return 0;
}

void CgroupLeaf::ReadFeatures() {
  has_kill_ = Exists(path_ + "/cgroup.kill");
  has_freeze_ = Exists(path_ + "/cgroup.freeze");
}

Expected<CgroupLeaf> CgroupLeaf::Create(const CgroupDelegation& d, const LeafLimits& limits) {
  auto leaf = Prepare(d, limits);
  if (!leaf.ok()) return leaf;
  const char* field = "";
  const char* file = "";
  if (int err = leaf.value().Make(&field, &file)) {
    if (*file == '\0') return Error{field, "mkdir " + leaf.value().path() + ": " + strerror(err)};
    return Error{field, std::string("write ") + leaf.value().path() + "/" + file + ": " + strerror(err)};
  }
  CgroupLeaf made = std::move(leaf).value();
  made.ReadFeatures();
  return made;
}

int CgroupLeaf::MoveProcess(pid_t pid) const {
  char text[24];
  snprintf(text, sizeof text, "%d", static_cast<int>(pid));
  return WriteAt(path_.c_str(), "cgroup.procs", text);
}

// Whether the leaf has control file `name`, asked of the leaf itself: a
// caller that aborts before ReadFeatures ran (a job whose init never
// reported) still gets cgroup.kill. No allocation.
bool CgroupLeaf::HasFile(const char* name) const {
  char file[PATH_MAX];
  if (snprintf(file, sizeof file, "%s/%s", path_.c_str(), name) >= static_cast<int>(sizeof file)) return false;
  return access(file, F_OK) == 0;
}

int CgroupLeaf::Kill() const {
  if (has_kill_ || HasFile("cgroup.kill")) return WriteAt(path_.c_str(), "cgroup.kill", "1");
  // Before Linux 5.14: freeze (so nothing forks meanwhile), kill each, thaw.
  const bool freeze = has_freeze_ || HasFile("cgroup.freeze");
  if (freeze) WriteAt(path_.c_str(), "cgroup.freeze", "1");
  char procs[8192];
  if (ReadAt(path_.c_str(), "cgroup.procs", procs, sizeof procs) < 0) return errno;
  for (char* p = procs; *p;) {
    const long pid = strtol(p, &p, 10);
    if (pid > 0) kill(static_cast<pid_t>(pid), SIGKILL);
    while (*p == '\n') ++p;
  }
  if (freeze) WriteAt(path_.c_str(), "cgroup.freeze", "0");
  return 0;
}

int CgroupLeaf::Freeze(bool frozen) const {
  if (!has_freeze_) return ENOTSUP;
  if (int err = WriteAt(path_.c_str(), "cgroup.freeze", frozen ? "1" : "0")) return err;
  char events[512];
  for (int waited = 0; waited < kSettleMillis; ++waited) {
    if (ReadAt(path_.c_str(), "cgroup.events", events, sizeof events) < 0) return errno;
    if (KeyedValue(events, "frozen") == (frozen ? 1 : 0)) return 0;
    SleepMillis(1);
  }
  return ETIMEDOUT;
}

bool CgroupLeaf::Populated() const {
  char events[512];
  if (ReadAt(path_.c_str(), "cgroup.events", events, sizeof events) < 0) return false;
  return KeyedValue(events, "populated") == 1;
}

long CgroupLeaf::OomKills() const {
  char events[1024];
  if (ReadAt(path_.c_str(), "memory.events", events, sizeof events) < 0) return -1;
  return KeyedValue(events, "oom_kill");
}

int CgroupLeaf::Remove() const {
  // An empty leaf (the common case: init is reaped, and with it the pid
  // namespace) goes at once; the kernel refuses rmdir on a populated one
  // (EBUSY), whose processes are then killed and awaited.
  if (rmdir(path_.c_str()) == 0 || errno == ENOENT) return 0;
  if (errno != EBUSY) return errno;
  for (int waited = 0; Populated(); ++waited) {
    if (waited % 100 == 0) Kill();
    if (waited >= kSettleMillis) return EBUSY;
    SleepMillis(1);
  }
  for (int tries = 0; rmdir(path_.c_str()) != 0; ++tries) {
    if (errno == ENOENT) return 0;
    if (errno != EBUSY || tries >= 100) return errno;
    SleepMillis(1);
  }
  return 0;
}

int CollectStaleLeaves(const std::string& base) {
  DIR* dir = opendir(base.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  const size_t prefix = strlen(kJobPrefix);
  while (dirent* e = readdir(dir)) {
    if (strncmp(e->d_name, kJobPrefix, prefix) != 0) continue;
    const long owner = atol(e->d_name + prefix);
    if (owner <= 0 || kill(static_cast<pid_t>(owner), 0) == 0 || errno != ESRCH) continue;
    const std::string path = base + "/" + e->d_name;
    char events[512];
    if (ReadAt(path.c_str(), "cgroup.events", events, sizeof events) < 0 || KeyedValue(events, "populated") != 0)
      continue;
    if (rmdir(path.c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

std::string CgroupProcLine(const CgroupFacts& facts, const std::string& absolute) {
  std::string rel = absolute.substr(std::min(absolute.size(), facts.mount_point.size()));
  if (rel.empty()) rel = "/";
  return "0::" + rel;
}

}  // namespace oarbank
