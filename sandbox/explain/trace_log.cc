#include "sandbox/explain/trace_log.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <fstream>
#include <istream>
#include <map>
#include <set>

#include "sandbox/seccomp/rules.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

// Splits strace's argument list at top-level commas.
std::vector<std::string> SplitArgs(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      cur += c;
      if (c == '\\' && i + 1 < s.size())
        cur += s[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '(':
      case '[':
      case '{':
      case '<': ++depth; break;
      case ')':
      case ']':
      case '}': --depth; break;
      case '>':
        if (i == 0 || s[i - 1] != '=') --depth;  // "[16 => 28]" is not a bracket
        break;
      default: break;
    }
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      if (i + 1 < s.size() && s[i + 1] == ' ') ++i;
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool IsFork(const TraceCall& c) {
  return c.name == "clone" || c.name == "clone3" || c.name == "fork" || c.name == "vfork";
}

bool IsExec(const TraceCall& c) { return (c.name == "execve" || c.name == "execveat") && c.ret == 0 && c.err.empty(); }

}  // namespace

std::optional<std::string> DecodeString(const std::string& token) {
  if (token.empty() || token[0] != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i < token.size(); ++i) {
    char c = token[i];
    if (c == '"') return out;
    if (c != '\\' || i + 1 >= token.size()) {
      out += c;
      continue;
    }
    c = token[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'v': out += '\v'; break;
      case 'f': out += '\f'; break;
      case 'x':
        if (i + 2 < token.size() && std::isxdigit(static_cast<unsigned char>(token[i + 1])) != 0 &&
            std::isxdigit(static_cast<unsigned char>(token[i + 2])) != 0) {
          out += static_cast<char>(std::strtol(token.substr(i + 1, 2).c_str(), nullptr, 16));
          i += 2;
        }
        break;
      default:
        if (c >= '0' && c <= '7') {
          size_t n = 0;
          int v = 0;
          while (n < 3 && i < token.size() && token[i] >= '0' && token[i] <= '7') v = v * 8 + (token[i++] - '0'), ++n;
          --i;
          out += static_cast<char>(v);
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::optional<std::string> FdPath(const std::string& token) {
  const auto lt = token.find('<');
  const auto gt = token.rfind('>');
  if (lt == std::string::npos || gt == std::string::npos || gt <= lt + 1) return std::nullopt;
  const std::string p = token.substr(lt + 1, gt - lt - 1);
  if (p.empty() || p[0] != '/') return std::nullopt;
  return p;
}

std::optional<TraceCall> ParseTraceLine(const std::string& line, int pid) {
  TraceCall call;
  call.pid = pid;
  call.raw = line;
  if (line.rfind("--- SIGSYS ", 0) == 0) {
    call.name = "SIGSYS";
    const auto at = line.find("si_syscall=");
    if (at != std::string::npos) {
      const auto end = line.find_first_of(",}", at);
      call.args.push_back(line.substr(at + 11, end - at - 11));
    }
    const auto arch = line.find("si_arch=");
    if (arch != std::string::npos) {
      const auto end = line.find_first_of(",}", arch);
      call.args.push_back(line.substr(arch + 8, end - arch - 8));
    }
    call.err = "SIGSYS";
    return call;
  }
  // "name(args) = ret", where strace pads short calls with spaces before '='.
  const auto open = line.find('(');
  const auto eq_sign = line.rfind(" = ");
  if (open == std::string::npos || eq_sign == std::string::npos || eq_sign < open) return std::nullopt;
  const auto eq = line.rfind(')', eq_sign);
  if (eq == std::string::npos || eq < open ||
      line.find_first_not_of(' ', eq + 1) != eq_sign + 1 /* '=' right after the padding */)
    return std::nullopt;
  call.name = line.substr(0, open);
  if (call.name.empty() || !std::all_of(call.name.begin(), call.name.end(),
                                        [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }))
    return std::nullopt;
  call.args = SplitArgs(line.substr(open + 1, eq - open - 1));
  const std::string ret = line.substr(eq_sign + 3);
  if (ret.empty() || ret[0] == '?') {
    call.unknown = true;
    return call;
  }
  call.ret = std::strtoll(ret.c_str(), nullptr, 10);
  if (call.ret < 0) {
    const auto space = ret.find(' ');
    if (space != std::string::npos) {
      const auto end = ret.find(' ', space + 1);
      call.err = ret.substr(space + 1, end == std::string::npos ? std::string::npos : end - space - 1);
    }
  } else if (IsFork(call)) {
    // "= 3 /* 5684 in strace's PID NS */": the child as the tracer sees it.
    const auto note = ret.find("/* ");
    call.child =
        static_cast<int>(note == std::string::npos ? call.ret : std::strtoll(ret.c_str() + note + 3, nullptr, 10));
  }
  return call;
}

namespace {

// A successful call that is neither a fork, an exec nor a chdir matters
// only for the working directory it shows: it is kept when that changed,
// so a long build's log costs memory for its refusals, not its calls. What
// is kept is bounded in count and bytes, whatever the job makes strace
// print: each argument cut at kMaxArg, the raw line at kMaxRaw.
constexpr size_t kMaxKeptCalls = 1 << 18;
constexpr size_t kMaxKeptBytes = size_t{128} << 20;
constexpr size_t kMaxArg = 4200;  // a path strace printed with -s 4096, quoted
constexpr size_t kMaxRaw = 512;

std::optional<std::string> ShownCwd(const TraceCall& c) {
  for (const auto& arg : c.args)
    if (arg.rfind("AT_FDCWD<", 0) == 0) return FdPath(arg);
  return std::nullopt;
}

// Keeps the calls of each process's log that matter (see kMaxKeptCalls).
class Keeper {
 public:
  void Take(std::map<int, std::vector<TraceCall>>& per_pid, const std::string& line, int pid) {
    if (cut_) return;
    // A call killed by seccomp (SECCOMP_RET_KILL_*): the kernel shows the
    // tracer no SIGSYS stop, only the process's end after a call with no
    // result. That call is the one the cage killed.
    if (line.rfind("+++ killed by SIGSYS", 0) == 0) {
      if (signalled_.count(pid) != 0) return;
      TraceCall killed;
      killed.pid = pid;
      killed.name = "SIGSYS";
      killed.err = "SIGSYS";
      // Its name, when the trace set holds it (a foreign-ABI call is not).
      killed.args.push_back(last_unknown_[pid].empty() ? "(a call outside the traced set)" : last_unknown_[pid]);
      killed.raw = line.substr(0, kMaxRaw);
      Keep(per_pid, std::move(killed));
      return;
    }
    auto call = ParseTraceLine(line, pid);
    if (!call) return;
    if (call->name == "SIGSYS") signalled_.insert(pid);
    if (call->unknown) last_unknown_[pid] = call->name;
    const auto cwd = ShownCwd(*call);
    // getsockopt(SO_ERROR) ends a non-blocking connect (explain.cc).
    const bool settles =
        call->name == "getsockopt" && call->args.size() > 3 && call->args[2] == "SO_ERROR" && call->args[3] != "[0]";
    const bool plain = call->err.empty() && call->name != "SIGSYS" && !IsFork(*call) && call->name != "execve" &&
                       call->name != "execveat" && call->name != "chdir" && !settles;
    std::string& last_cwd = last_cwd_[pid];
    if (plain && (!cwd || *cwd == last_cwd)) return;
    if (cwd) last_cwd = *cwd;
    Keep(per_pid, std::move(*call));
  }

  bool cut() const { return cut_; }

 private:
  void Keep(std::map<int, std::vector<TraceCall>>& per_pid, TraceCall call) {
    if (call.raw.size() > kMaxRaw) call.raw.resize(kMaxRaw);
    size_t bytes = call.raw.size();
    for (auto& arg : call.args) {
      if (arg.size() > kMaxArg) arg.resize(kMaxArg);
      bytes += arg.size();
    }
    if (kept_ >= kMaxKeptCalls || bytes_ + bytes > kMaxKeptBytes) {
      cut_ = true;
      return;
    }
    ++kept_;
    bytes_ += bytes;
    per_pid[call.pid].push_back(std::move(call));
  }

  size_t kept_ = 0, bytes_ = 0;
  bool cut_ = false;
  std::map<int, std::string> last_cwd_, last_unknown_;
  std::set<int> signalled_;
};

struct Logs {
  std::map<int, std::vector<TraceCall>> per_pid;
  bool cut = false;
};

// strace -ff: one file per process, PREFIX.PID.
Logs ReadLogs(const std::string& prefix) {
  const fs::path dir = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + ".";
  Logs logs;
  Keeper keeper;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + stem.size());
    if (pid <= 0) continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) keeper.Take(logs.per_pid, line, pid);
  }
  logs.cut = keeper.cut();
  return logs;
}

// strace -f into one stream: the pid before every line, and a call
// another process interrupted split in two: "NAME(args <unfinished ...>"
// then "<... NAME resumed>rest", joined here.
Logs ReadMergedLog(std::istream& in) {
  Logs logs;
  std::map<int, std::string> unfinished;
  Keeper keeper;
  constexpr std::string_view kUnfinished = " <unfinished ...>";
  for (std::string line; std::getline(in, line);) {
    // "1234 call(...)" (strace -f -o FILE), or "[pid 1234] call(...)".
    const bool bracketed = line.rfind("[pid ", 0) == 0;
    const size_t digits = bracketed ? 5 : 0;
    const auto close = line.find(bracketed ? "] " : " ");
    if (close == std::string::npos || close == digits) continue;
    const int pid = std::atoi(line.c_str() + digits);
    if (pid <= 0) continue;
    const size_t skip = bracketed ? 2 : 1;
    // strace pads the pid to a width: "1770  clone3(...)".
    const auto body = line.find_first_not_of(' ', close + skip);
    if (body == std::string::npos) continue;
    std::string rest = line.substr(body);
    if (rest.size() >= kUnfinished.size() &&
        rest.compare(rest.size() - kUnfinished.size(), kUnfinished.size(), kUnfinished) == 0) {
      unfinished[pid] = rest.substr(0, rest.size() - kUnfinished.size());
      continue;
    }
    if (rest.rfind("+++ ", 0) == 0) {
      // The process ended inside an unfinished call (a seccomp kill): that
      // call never returned.
      if (const auto it = unfinished.find(pid); it != unfinished.end()) {
        keeper.Take(logs.per_pid, it->second + ") = ?", pid);
        unfinished.erase(it);
      }
    } else if (rest.rfind("<... ", 0) == 0) {
      // "<... NAME resumed>": joined to this pid's unfinished NAME; a call
      // that began under another pid (an exec by a thread, reported under
      // the thread group's leader) is read from its end alone.
      const auto resumed = rest.find(" resumed>");
      if (resumed == std::string::npos) continue;
      const std::string name = rest.substr(5, resumed - 5);
      const auto it = unfinished.find(pid);
      const bool joins = it != unfinished.end() && it->second.rfind(name + "(", 0) == 0;
      rest = (joins ? it->second : name + "(") + rest.substr(resumed + 9);
      if (it != unfinished.end()) unfinished.erase(it);
    }
    keeper.Take(logs.per_pid, rest, pid);
  }
  logs.cut = keeper.cut();
  return logs;
}

ModuleTrace Walk(Logs logs, TraceStart start);

}  // namespace

ModuleTrace ReadModuleTrace(const std::string& prefix, TraceStart start) { return Walk(ReadLogs(prefix), start); }

ModuleTrace ReadMergedTrace(int fd, TraceStart start) {
  const int own = dup(fd);
  if (own < 0) return {};
  lseek(own, 0, SEEK_SET);  // shared with `fd`: the tracer wrote through a descriptor of its own
  __gnu_cxx::stdio_filebuf<char> buf(own, std::ios::in);
  std::istream in(&buf);
  return Walk(ReadMergedLog(in), start);
}

namespace {

bool HasFlag(const TraceCall& c, const char* flag) {
  return std::any_of(c.args.begin(), c.args.end(),
                     [flag](const std::string& a) { return a.find(flag) != std::string::npos; });
}

ModuleTrace Walk(Logs logs, TraceStart start) {
  ModuleTrace out;
  out.cut = logs.cut;
  std::map<int, std::vector<TraceCall>>& per_pid = logs.per_pid;
  std::set<int> children;
  for (const auto& [pid, calls] : per_pid)
    for (const auto& c : calls)
      if (IsFork(c) && c.child > 0) children.insert(c.child);
  // Walk from the root (the one process nobody forked), carrying "is the
  // module" across each fork. Under sandbox-exec only the launcher's own
  // process becomes the module (by its second exec); what it forked before
  // that never does. The working directory is carried the same way:
  // strace -y shows it in every AT_FDCWD argument, and a child starts in
  // its parent's.
  // A stack of processes still to read, not recursion: the job chooses how
  // deep its forks go.
  const int execs_to_module = start == TraceStart::kLauncherSecondExec ? 2 : 1;
  struct Pending {
    int pid, tgid;
    bool module, may_become;
    std::string cwd, program;
  };
  std::vector<Pending> todo;
  for (const auto& [pid, calls] : per_pid)
    if (children.count(pid) == 0) todo.push_back({pid, pid, false, true, "/", ""});
  std::set<int> walked;
  while (!todo.empty()) {
    Pending p = std::move(todo.back());
    todo.pop_back();
    const auto it = per_pid.find(p.pid);
    if (it == per_pid.end() || !walked.insert(p.pid).second) continue;
    int execs = 0;
    std::vector<Pending> forked;
    for (auto& c : it->second) {
      if (auto dir = ShownCwd(c)) p.cwd = *dir;
      if (c.name == "chdir" && c.ret == 0 && c.err.empty() && !c.args.empty())
        if (auto dir = DecodeString(c.args[0])) p.cwd = (!dir->empty() && (*dir)[0] == '/') ? *dir : p.cwd + "/" + *dir;
      const size_t path_arg = c.name == "execveat" ? 1 : 0;
      if (IsExec(c) && c.args.size() > path_arg)
        if (auto path = DecodeString(c.args[path_arg])) p.program = path->substr(path->rfind('/') + 1);
      c.cwd = p.cwd;
      c.program = p.program;
      c.tgid = p.tgid;
      if (!p.module && p.may_become && IsExec(c)) {
        if (++execs >= execs_to_module) p.module = out.module_ran = true;
        continue;
      }
      if (p.module) out.calls.push_back(c);
      if (!IsFork(c) || c.child <= 0) continue;
      // A child made with CLONE_UNTRACED is not reported to the tracer:
      // what it does is missing, and the explanation says so.
      if (p.module && HasFlag(c, "CLONE_UNTRACED")) out.untraced = true;
      forked.push_back({c.child, HasFlag(c, "CLONE_THREAD") ? p.tgid : c.child, p.module,
                        start == TraceStart::kFirstExec && !p.module, p.cwd, p.program});
    }
    // The first child forked is read next.
    todo.insert(todo.end(), std::make_move_iterator(forked.rbegin()), std::make_move_iterator(forked.rend()));
  }
  return out;
}

}  // namespace

std::string TraceSet() {
  std::string set = "trace=%file,%network,%process";
  std::set<std::string> names;
  for (const auto& rule : SeccompRuleTable()) names.insert(rule.syscall);
  for (const auto& n : names) set += ",?" + n;
  return set;
}

std::vector<std::string> StraceCommand(const std::string& strace, const std::string& prefix) {
  return {strace, "-f", "-ff", "-q", "-s", "4096", "-y", "--decode-pids=pidns", "-o", prefix, "-e", TraceSet()};
}

std::vector<std::string> MergedStraceCommand(const std::string& strace, int fd) {
  return {
      strace, "-f",      "-q", "-s", "4096", "-y", "--decode-pids=pidns", "-o", "/proc/self/fd/" + std::to_string(fd),
      "-e",   TraceSet()};
}

}  // namespace oarbank
