#include "sandbox/cli/job_io.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <tuple>

#include "sandbox/cli/numbers.h"
#include "sandbox/cli/raw_terminal.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/grant_path.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/path_within.h"
#include "sandbox/common/read_file.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {
namespace {

constexpr uint64_t kMaxInMemoryCap = 16ull << 20;  // a cap kept in memory (and in the JSON)
constexpr uint64_t kMaxSpooledCap = 1ull << 40;    // a cap written to --stdout-file / --stderr-file
constexpr const char* kDefaultCap = "1M";          // a stream kept in memory
constexpr const char* kDefaultSpooledCap = "1G";   // a stream spooled to its file
constexpr uint64_t kMaxShmSize = 16ull << 30;      // --shm-size
constexpr uint64_t kMinShmSize = 4096;

bool Usage(const std::string& line) {
  fprintf(stderr, "usage: %s\n", line.c_str());
  return false;
}

// For a spool file that cannot be opened: one usage line, no fd.
std::optional<int> NoFile(const std::string& line) {
  Usage(line);
  return std::nullopt;
}

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) != nullptr ? std::string(cwd) + "/" + path : path;
}

// Opens a spool file as the header says; the fd, or nullopt after one line.
std::optional<int> OpenSpoolFile(const char* option, const std::string& raw, const std::vector<std::string>& writable) {
  const std::string path = Absolute(raw);
  const std::string prefix = std::string(option) + " " + raw + ": ";
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? "" : path.substr(slash + 1);
  if (path.empty() || path[0] != '/' || name.empty() || name == "." || name == "..")
    return NoFile(prefix + "expected the path of a file");
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  ResolveOptions resolve;
  resolve.named = writable;
  auto resolved = ResolveGrantPath(dir, resolve);
  if (!resolved.ok()) return NoFile(prefix + resolved.error().what);
  const std::string canonical = resolved.value().path == "/" ? "/" + name : resolved.value().path + "/" + name;
  for (const auto& grant : writable)
    if (IsAtOrBelow(canonical, grant))
      return NoFile(prefix + "inside " + grant +
                    ", which the job may write: a job could have put a link or another file at that name; name a "
                    "file outside the job's writable directories");
  UniqueFd parent(OpenNoSymlinksAt(AT_FDCWD, resolved.value().path.c_str(), O_PATH | O_DIRECTORY));
  if (!parent.valid()) return NoFile(prefix + strerror(errno));
  // No O_TRUNC: the file is truncated only once it has been checked.
  UniqueFd fd(openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  struct stat st {};
  if (!fd.valid())
    return NoFile(prefix + (errno == ELOOP   ? "a symbolic link"
                            : errno == ENXIO ? "not a regular file (a FIFO)"
                                             : strerror(errno)));
  if (fstat(fd.get(), &st) != 0) return NoFile(prefix + strerror(errno));
  if (!S_ISREG(st.st_mode)) return NoFile(prefix + "not a regular file (" + FileKindName(st.st_mode) + ")");
  if (st.st_nlink != 1)
    return NoFile(prefix + "has " + std::to_string(st.st_nlink) +
                  " hard links: writing it would change another name's file");
  if (ftruncate(fd.get(), 0) != 0) return NoFile(prefix + strerror(errno));
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd.Release();
}

// --stdout-max and --stderr-max: at most kMaxInMemoryCap, or kMaxSpooledCap
// for a stream written to its file.
bool SetByteCaps(const JobIoOptions& io, cage::RunOptions& options) {
  for (const auto& [option, text, file, file_option, max] :
       {std::tuple{"--stdout-max", &io.stdout_max, &io.stdout_file, "--stdout-file", &options.stdout_max},
        {"--stderr-max", &io.stderr_max, &io.stderr_file, "--stderr-file", &options.stderr_max}}) {
    const std::string given = !text->empty() ? *text : file->empty() ? kDefaultCap : kDefaultSpooledCap;
    std::string why;
    const auto bytes = ParseByteCount(given, file->empty() ? kMaxInMemoryCap : kMaxSpooledCap, &why);
    if (!bytes) {
      std::string unused;
      const bool needs_file = file->empty() && ParseByteCount(given, kMaxSpooledCap, &unused);
      return Usage(std::string(option) + ": " + why +
                   (needs_file ? std::string(" (more needs ") + file_option + ")" : ""));
    }
    *max = static_cast<size_t>(*bytes);
  }
  return true;
}

bool OpenSpoolFiles(const JobIoOptions& io, const std::vector<std::string>& writable, cage::RunOptions& options) {
  if (!io.stdout_file.empty() && Absolute(io.stdout_file) == Absolute(io.stderr_file))
    return Usage("--stdout-file and --stderr-file: the same file " + io.stdout_file);
  for (const auto& [option, path, fd] : {std::tuple{"--stdout-file", &io.stdout_file, &options.stdout_fd},
                                         {"--stderr-file", &io.stderr_file, &options.stderr_fd}}) {
    if (path->empty()) continue;
    const auto opened = OpenSpoolFile(option, *path, writable);
    if (!opened) return false;
    *fd = *opened;
  }
  return true;
}

bool SetShmSize(const std::string& text, cage::RunOptions& options) {
  std::string why;
  const auto shm = ParseByteCount(text, kMaxShmSize, &why);
  if (!shm || *shm < kMinShmSize) return Usage("--shm-size: " + (shm ? std::string("at least 4K") : why));
  options.shm_max = *shm;
  return true;
}

int ExitStatus(const cage::Result& result) {
  switch (result.fault) {
    case cage::Fault::kRefused: return kExitNotEnforced;
    case cage::Fault::kExec: return kExitExecFailed;
    case cage::Fault::kNone:
    case cage::Fault::kTimeout:
    case cage::Fault::kOom: break;
  }
  if (!result.spool_error.empty()) return kExitOutputLost;
  return result.signal != 0 ? 128 + result.signal : result.exit_code;
}

void PrintJson(const JobIoOptions& io, const cage::Result& result, const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json report = cage::ResultReport(result);
  const auto file = [](const std::string& path) {
    return path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(Absolute(path));
  };
  report["stdout_file"] = file(io.stdout_file);
  report["stderr_file"] = file(io.stderr_file);
  for (const auto& [key, value] : extra.items()) report[key] = value;
  // A reason naming a path that is not UTF-8 is shown with U+FFFD, never refused.
  const std::string text = report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  fwrite(text.data(), 1, text.size(), stdout);
  fputc('\n', stdout);
}

void PrintLines(const cage::Result& result, bool streamed_out, bool streamed_err) {
  // What streamed was all of it; a spool file holds up to its cap.
  for (const auto& [cut, dropped, name] :
       {std::tuple{result.stdout_truncated && !streamed_out, result.stdout_dropped, "stdout"},
        {result.stderr_truncated && !streamed_err, result.stderr_dropped, "stderr"}})
    if (cut) fprintf(stderr, "sandbox: %s cut at the cap: %llu bytes dropped\n", name, (unsigned long long)dropped);
  if (!result.spool_error.empty()) fprintf(stderr, "sandbox: %s\n", result.spool_error.c_str());
  if (result.fault != cage::Fault::kNone)
    fprintf(stderr, "sandbox: %s: %s\n", cage::FaultName(result.fault), result.reason.c_str());
}

}  // namespace

std::vector<std::string> WritableGrants(const Policy& policy) {
  std::vector<std::string> writable;
  for (const auto& g : policy.grants())
    if (g.access == Access::kReadWrite) writable.push_back(g.path);
  return writable;
}

void AddJobIoOptions(CLI::App* sub, JobIoOptions& io, const std::string& json_help) {
  sub->add_flag("--json", io.json, json_help);
  sub->add_flag(
      "--stdin", io.relay_stdin,
      "Relay this process's stdin into the job's (a pipe) until EOF; without it the job's stdin is /dev/null");
  sub->add_flag("--pty", io.pty,
                "Run the job on a pseudo-terminal of its own (its stdin, stdout, stderr and controlling terminal), "
                "relayed to this process's stdin and stdout; stdin is relayed, a terminal there is raw meanwhile");
  sub->add_option("--shm-size", io.shm_size,
                  "Size of the job's private /dev/shm tmpfs (K, M, G suffixes; default 64M, 4K to 16G; charged to "
                  "the job's cgroup)");
  sub->add_option("--stdout-max", io.stdout_max,
                  "Keep at most this many bytes of stdout (K, M, G suffixes; default 1M, at most 16M; with "
                  "--stdout-file default 1G, at most 1T)");
  sub->add_option("--stderr-max", io.stderr_max, "Keep at most this many bytes of stderr (as --stdout-max)");
  sub->add_option("--stdout-file", io.stdout_file,
                  "Write the job's stdout (up to --stdout-max) to this file, outside every directory the job may "
                  "write; memory and JSON keep its first 64 KiB");
  sub->add_option("--stderr-file", io.stderr_file, "Write the job's stderr to this file (as --stdout-file)");
}

bool ApplyJobIo(const JobIoOptions& io, const std::vector<std::string>& writable, cage::RunOptions& options) {
  if (!SetByteCaps(io, options) || !SetShmSize(io.shm_size, options)) return false;
  if (!OpenSpoolFiles(io, writable, options)) return false;
  if (io.relay_stdin || io.pty) options.stdin_fd = STDIN_FILENO;
  options.pty = io.pty;
  // The caller's terminal (stdin's, else stdout's) gives the job's its window size.
  if (io.pty) options.terminal_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
  return true;
}

int RunJobAndReport(const JobIoOptions& io, cage::RunOptions options,
                    const std::function<cage::Result(const cage::RunOptions&)>& job,
                    const nlohmann::ordered_json& extra, const std::function<JobAfterword()>& after) {
  // Without --json the job's output streams to stdout and stderr as it
  // comes (a stream with a spool file goes only there).
  const bool stream_out = !io.json && io.stdout_file.empty();
  const bool stream_err = !io.json && io.stderr_file.empty();
  if (stream_out) options.stream_stdout_fd = STDOUT_FILENO;
  if (stream_err) options.stream_stderr_fd = STDERR_FILENO;
  cage::Result result;
  {
    // The caller's terminal is raw only while the job runs on its own.
    std::optional<RawTerminal> raw;
    if (options.pty) raw.emplace(STDIN_FILENO);
    result = job(options);
  }
  const int status = ExitStatus(result);
  try {
    nlohmann::ordered_json members = extra;
    std::optional<JobAfterword> afterword;
    if (after && result.fault != cage::Fault::kRefused) afterword = after();
    if (afterword) members["explain"] = afterword->json;
    if (io.json) {
      PrintJson(io, result, members);
    } else {
      PrintLines(result, stream_out, stream_err);
      if (afterword)
        for (const auto& line : afterword->lines) fprintf(stderr, "sandbox: %s\n", line.c_str());
    }
  } catch (const std::exception& e) {
    // Never reached with the encodings above; if it were, the status stands.
    fprintf(stderr, "sandbox: the result could not be printed (%s); the job's status is %d\n", e.what(), status);
  }
  fflush(stdout);
  return status;
}

}  // namespace oarbank
