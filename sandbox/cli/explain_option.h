// `--explain` for `run` and `cage`: the job runs traced from outside its
// cage (supervise/job_trace.h), and once it has ended each refusal is
// explained (explain/explain.h) in the words of the command that started
// it: policy fields for `run`, options for `cage`. Off by default: tracing
// every file and network call slows a build (bench/explain.sh measures it).
//
// The tracer, which may be root, writes its log into a file with no name
// (O_TMPFILE), read back once the job has ended: no process, this job or
// another, can plant a link where it writes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sandbox/cli/job_io.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/explain/explain.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

// Where --explain finds its tracer.
inline constexpr char kStracePath[] = "/usr/bin/strace";

void AddExplainOption(CLI::App* sub, bool& explain);

class JobExplainer {
 public:
  JobExplainer(const JobExplainer&) = delete;
  JobExplainer& operator=(const JobExplainer&) = delete;
  ~JobExplainer() = default;

  // Checks the tracer, opens its files and sets hooks.trace.
  // Nothing, one line on stderr and the exit status in `exit` when it
  // cannot be done: 64 with --debug, 70 where it cannot be done here.
  static std::unique_ptr<JobExplainer> Prepare(const Policy& policy, Speaker speaker, cage::JobHooks& hooks, int* exit);

  // Once the job has ended: the `explain` member of --json and the lines
  // for stderr.
  JobAfterword Explain() const;

 private:
  JobExplainer() = default;
  JobAfterword ExplainTrace() const;
  const Policy* policy_ = nullptr;
  Speaker speaker_ = Speaker::kPolicy;
  UniqueFd log_, err_;
  std::shared_ptr<cage::JobTrace> trace_;
};

}  // namespace oarbank
