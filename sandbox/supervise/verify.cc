#include "sandbox/supervise/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>  // ST_RDONLY, ST_NOEXEC: statfs(2)'s f_flags
#include <unistd.h>

#include <cstring>
#include <map>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/host/root_etc.h"  // kRootEtcOwner

namespace oarbank {
namespace {

std::string ReadSmallFile(const std::string& path, int* err) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  *err = 0;
  return text;
}

std::string NsLink(const std::string& pid, const std::string& ns) {
  char target[128];
  const ssize_t n = readlink(("/proc/" + pid + "/ns/" + ns).c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "";
}

// An absolute path in the job's view, as opened from its root fd.
std::string RelativeToRoot(const std::string& path) {
  return path.find_first_not_of('/') == std::string::npos ? "." : path.substr(1);
}

// The start of every reason the gate gives for a root job's /etc.
constexpr const char* kNotTheEtcView = "a root job's /etc is not the idmapped view (root_etc.h)";

bool AllZeroHex(const std::string& v) { return !v.empty() && v.find_first_not_of('0') == std::string::npos; }

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view oct = field.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

}  // namespace

std::optional<std::string> CheckMountOption(std::string_view mountinfo, const std::vector<std::string>& paths,
                                            std::string_view option) {
  const std::string wanted = "," + std::string(option) + ",";
  for (const auto& path : paths) {
    bool mounted_with = false;  // the last mount on the path decides
    std::string_view text = mountinfo;
    while (!text.empty()) {
      const size_t eol = text.find('\n');
      std::string_view line = text.substr(0, eol);
      text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
      // id parent major:minor root mount-point options ...
      std::string_view fields[6];
      for (auto& f : fields) {
        const size_t sp = line.find(' ');
        f = line.substr(0, sp);
        line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
      }
      // Most mount points have no escaped character: compared in place.
      const std::string_view point = fields[4];
      if (point.find('\\') == std::string_view::npos ? point != path : Unescape(point) != path) continue;
      const std::string options = "," + std::string(fields[5]) + ",";
      mounted_with = options.find(wanted) != std::string::npos;
    }
    if (!mounted_with) return path;
  }
  return std::nullopt;
}

GateReading ParseProcStatus(std::string_view text) {
  GateReading r;
  const std::pair<std::string_view, std::string*> keys[] = {
      {"NoNewPrivs", &r.no_new_privs}, {"Seccomp", &r.seccomp}, {"Seccomp_filters", &r.seccomp_filters},
      {"CapEff", &r.cap_eff},          {"CapPrm", &r.cap_prm},  {"CapInh", &r.cap_inh},
      {"CapAmb", &r.cap_amb},          {"PPid", &r.ppid},
  };
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == '\t' || value.front() == ' ')) value.remove_prefix(1);
    for (const auto& [name, field] : keys)
      if (key == name) *field = std::string(value);
  }
  return r;
}

std::optional<std::string> CheckGateReading(const GateReading& r, pid_t parent) {
  auto show = [](const std::string& v) { return v.empty() ? std::string("absent") : v; };
  if (r.ppid != std::to_string(parent))
    return "PPid is " + show(r.ppid) + ", not the job's init " + std::to_string(parent);
  if (r.no_new_privs != "1") return "NoNewPrivs is " + show(r.no_new_privs) + " (want 1)";
  if (r.seccomp != "2") return "Seccomp is " + show(r.seccomp) + " (want 2: a filter)";
  if (r.seccomp_filters.empty() || r.seccomp_filters.find_first_not_of("0123456789") != std::string::npos ||
      std::stol(r.seccomp_filters) < 1)
    return "Seccomp_filters is " + show(r.seccomp_filters) + " (want at least 1)";
  for (const auto& [name, value] :
       {std::pair{"CapEff", &r.cap_eff}, {"CapPrm", &r.cap_prm}, {"CapInh", &r.cap_inh}, {"CapAmb", &r.cap_amb}})
    if (!AllZeroHex(*value)) return std::string(name) + " is " + show(*value) + " (want 0)";
  return std::nullopt;
}

std::optional<std::string> CheckMountedInodes(int root, const std::map<std::string, FileId>& inodes) {
  for (const auto& [path, inode] : inodes) {
    if (!inode.known()) continue;
    const std::string relative = RelativeToRoot(path);
    const UniqueFd fd(OpenNoSymlinksAt(root, relative.c_str(), O_PATH));
    struct stat st {};
    if (!fd.valid() || fstat(fd.get(), &st) != 0)
      return path + " cannot be opened in the job's view without following a link: " + strerror(errno);
    if (!(FileId{st.st_dev, st.st_ino} == inode))
      return path + " in the job's view is another directory or file than the policy named (device " +
             std::to_string(st.st_dev) + " inode " + std::to_string(st.st_ino) + ", want device " +
             std::to_string(inode.dev) + " inode " + std::to_string(inode.ino) + ")";
  }
  return std::nullopt;
}

std::string MountMiss::Detail() const {
  return err == 0 ? "" : std::string(" (") + unread + ": " + strerror(err) + ")";
}

std::optional<MountMiss> FirstMountWithout(int root, const std::vector<std::string>& paths, unsigned long flag,
                                           bool set) {
  for (const auto& path : paths) {
    const std::string relative = RelativeToRoot(path);
    const UniqueFd fd(OpenNoSymlinksAt(root, relative.c_str(), O_PATH));
    struct statfs fs {};
    if (!fd.valid() || fstatfs(fd.get(), &fs) != 0) return MountMiss{path, errno};
    if (((fs.f_flags & flag) != 0) != set) return MountMiss{path, 0};
  }
  return std::nullopt;
}

std::optional<MountMiss> FirstNotMountedReadOnly(int root, const std::string& pid,
                                                 const std::vector<std::string>& paths) {
  std::string mountinfo;  // read once, for the first path whose filesystem is read-only on the host too
  for (const auto& path : paths) {
    if (auto miss = FirstMountWithout(root, {path}, ST_RDONLY, true)) return miss;
    const UniqueFd host(OpenNoSymlinksAt(AT_FDCWD, path.c_str(), O_PATH));
    struct statfs fs {};
    if (host.valid() && fstatfs(host.get(), &fs) == 0 && (fs.f_flags & ST_RDONLY) == 0) continue;
    if (mountinfo.empty()) {
      int err = 0;
      mountinfo = ReadSmallFile("/proc/" + pid + "/mountinfo", &err);
      if (err != 0) return MountMiss{path, err, "the job's mountinfo cannot be read"};
    }
    if (CheckMountOption(mountinfo, {path}, "ro")) return MountMiss{path, 0};
  }
  return std::nullopt;
}

std::optional<std::string> CheckRootEtcView(int root, const struct stat& host) {
  const UniqueFd etc(OpenNoSymlinksAt(root, "etc", O_PATH));
  struct stat job {};
  if (!etc.valid() || fstat(etc.get(), &job) != 0)
    return std::string(kNotTheEtcView) + ": it cannot be opened without following a link: " + strerror(errno);
  if (job.st_dev != host.st_dev || job.st_ino != host.st_ino)
    return std::string(kNotTheEtcView) + ": another directory";
  if (job.st_uid != kRootEtcOwner)
    return std::string(kNotTheEtcView) + ": it is owned by uid " + std::to_string(job.st_uid) + " (want " +
           std::to_string(kRootEtcOwner) + ")";
  return std::nullopt;
}

namespace {

// The gate's stages, in order: each gives the first thing that failed, or
// nothing.

// /proc/<pid>/status (the reading is kept for the result) and the core limit.
std::optional<std::string> CheckProcess(const std::string& p, pid_t pid, pid_t parent, GateReading& reading) {
  int err = 0;
  const std::string status = ReadSmallFile("/proc/" + p + "/status", &err);
  if (err != 0) return "cannot read /proc/" + p + "/status: " + strerror(err);
  reading = ParseProcStatus(status);
  if (auto why = CheckGateReading(reading, parent); why && !FaultSkipStep("gate-status")) return why;
  if (FaultSkipStep("gate-core-limit")) return std::nullopt;  // test-only build (common/fault_hooks.h)
  rlimit core{};
  if (prlimit(pid, RLIMIT_CORE, nullptr, &core) != 0)
    return std::string("cannot read its RLIMIT_CORE: ") + strerror(errno);
  if (core.rlim_cur != 0 || core.rlim_max != 0)
    return "RLIMIT_CORE is " + std::to_string(core.rlim_cur) + "/" + std::to_string(core.rlim_max) +
           " (want 0/0: a crash would dump core)";
  return std::nullopt;
}

// The job's cgroup leaf (when it has one) and its fresh namespaces.
std::optional<std::string> CheckContainer(const std::string& p, const GateExpectations& want) {
  if (!want.cgroup_line.empty() && !FaultSkipStep("gate-cgroup")) {
    int err = 0;
    const std::string cgroup = ReadSmallFile("/proc/" + p + "/cgroup", &err);
    if (cgroup.find(want.cgroup_line + "\n") == std::string::npos)
      return "not in the job's cgroup leaf (" + want.cgroup_line + "): /proc/" + p + "/cgroup says " + cgroup;
  }
  const std::map<std::string, std::string>& own = OwnNamespaces();
  for (const auto& ns : want.fresh) {
    if (FaultSkipStep("gate-fresh-namespaces")) break;
    const auto it = own.find(ns);
    const std::string mine = it != own.end() ? it->second : NsLink("self", ns);
    const std::string theirs = NsLink(p, ns);
    if (theirs.empty() || theirs == mine)
      return "not in a fresh " + ns + " namespace (" + (theirs.empty() ? "unreadable" : theirs) + ")";
  }
  return std::nullopt;
}

// A root job's /etc, when the host's /etc is not root's: its owner says
// nothing, so the mount's own flag is read from mountinfo.
std::optional<std::string> CheckRootEtc(const std::string& p, int root) {
  struct stat host {};
  if (stat("/etc", &host) != 0)
    return std::string(kNotTheEtcView) + ": cannot stat the host's /etc: " + strerror(errno);
  if (host.st_uid == 0) return CheckRootEtcView(root, host);
  int err = 0;
  const std::string mountinfo = ReadSmallFile("/proc/" + p + "/mountinfo", &err);
  if (err != 0) return std::string(kNotTheEtcView) + ": cannot read /proc/" + p + "/mountinfo: " + strerror(err);
  if (CheckMountOption(mountinfo, {"/etc"}, "idmapped")) return std::string(kNotTheEtcView) + " (mountinfo)";
  return std::nullopt;
}

// What the job's mount namespace holds, each path opened from its root with
// no link followed and its mount's flags read with fstatfs(2): read-only /,
// the noexec and read-only binds, the inode under each grant, a root job's
// idmapped /etc, and the job's own devices on top.
std::optional<std::string> CheckMounts(const std::string& p, const GateExpectations& want) {
  const UniqueFd root(open(("/proc/" + p + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return "cannot open /proc/" + p + "/root: " + strerror(errno);
  const int r = root.get();
  // Each check can be left out by the test-only build (common/fault_hooks.h).
  auto skip = [](const char* check) { return FaultSkipStep(check); };
  if (auto miss = FirstNotMountedReadOnly(r, p, {"/"}); miss && !skip("gate-read-only-root"))
    return "/ is not mounted read-only (filesystem.metadata)" + miss->Detail();
  if (auto miss = FirstMountWithout(r, want.noexec, ST_NOEXEC, true); miss && !skip("gate-noexec"))
    return "the writable grant " + miss->path + " is not mounted noexec" + miss->Detail();
  if (auto miss = FirstNotMountedReadOnly(r, p, want.read_only); miss && !skip("gate-read-only-carve-outs"))
    return "the read-only carve-out " + miss->path + " is not mounted read-only" + miss->Detail();
  if (!want.inodes.empty() && !skip("gate-inodes")) {
    if (auto why = CheckMountedInodes(r, want.inodes)) return why;
  }
  if (want.root_etc_idmapped && !skip("gate-root-etc")) {
    if (auto why = CheckRootEtc(p, r)) return why;
  }
  // Every mount the job inherited is read-only: a writable one on these
  // paths is the job's own, mounted after.
  if (want.job_devices && !skip("gate-job-devices")) {
    if (auto miss = FirstMountWithout(r, {"/dev/pts", "/dev/shm"}, ST_RDONLY, false))
      return miss->path + " is not the job's own (job_devices.h)" + miss->Detail();
    if (auto miss = FirstMountWithout(r, {"/dev/shm"}, ST_NOEXEC, true))
      return "the job's /dev/shm is not mounted noexec" + miss->Detail();
  }
  return std::nullopt;
}

}  // namespace

const std::map<std::string, std::string>& OwnNamespaces() {
  static const std::map<std::string, std::string> own = [] {
    std::map<std::string, std::string> links;
    for (const char* n : {"user", "pid", "ipc", "uts", "mnt", "net", "cgroup", "time"}) links[n] = NsLink("self", n);
    return links;
  }();
  return own;
}

GateCheck VerifyConfined(pid_t pid, pid_t parent, const GateExpectations& want) {
  GateCheck check;
  const std::string p = std::to_string(pid);
  auto why = CheckProcess(p, pid, parent, check.reading);
  if (!why) why = CheckContainer(p, want);
  if (!why) why = CheckMounts(p, want);
  check.ok = !why;
  if (why) check.reason = *why;
  return check;
}

}  // namespace oarbank
