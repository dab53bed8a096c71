// A supervised job's input and output on the command line, the same for
// `run` and `cage`: output that streams as it comes (or goes to a spool
// file), --stdin, --pty, --shm-size, the byte caps, and the report printed
// once the job has ended (the module's status, 64 for bad input, 70 when
// refused, 71 when exec failed).
//
// A spool file (--stdout-file, --stderr-file) is written by the agent, which
// may be root, with whatever the job prints, so it is opened as a grant is
// resolved (common/grant_path.h): never through a symbolic link a job could
// have planted on the way, never inside a directory the job may write (a
// job there, in this run or an earlier one, could have put a link, a FIFO
// or a hard link to another file at that name), only a regular file with a
// single link, truncated once it has been checked, and bounded by its cap.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "oarbank/cage.h"
#include "sandbox/policy/policy.h"

namespace oarbank {

struct JobIoOptions {
  bool json = false;
  bool relay_stdin = false;
  bool pty = false;
  std::string shm_size = "64M";
  std::string stdout_max, stderr_max;  // empty: 1M, or 1G for a stream spooled to a file
  std::string stdout_file, stderr_file;
};

// The options above on `sub`; `json_help` says what --json prints.
void AddJobIoOptions(CLI::App* sub, JobIoOptions& io, const std::string& json_help);

// The policy's writable grants, canonical: where no spool file may lie.
std::vector<std::string> WritableGrants(const Policy& policy);

// Parses the sizes, opens the spool files and sets `options` from `io`.
// `writable`: the job's writable grants (canonical), where no spool file
// may lie. One usage line on stderr and false for bad input.
bool ApplyJobIo(const JobIoOptions& io, const std::vector<std::string>& writable, cage::RunOptions& options);

// What a command adds once the job has ended (--explain): a member of
// --json, or lines on stderr ("sandbox: " before each).
struct JobAfterword {
  nlohmann::ordered_json json;
  std::vector<std::string> lines;
};

// Runs `job` with `options` (streaming as `io` says; the caller's terminal
// raw meanwhile with --pty), prints the result (as JSON with `extra`'s
// members added, and `after`'s as "explain", or as lines) and returns the
// exit status.
int RunJobAndReport(const JobIoOptions& io, cage::RunOptions options,
                    const std::function<cage::Result(const cage::RunOptions&)>& job,
                    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                    const std::function<JobAfterword()>& after = nullptr);

}  // namespace oarbank
