// `--explain` for `run` and `cage`: the job runs traced from outside its
// cage (supervise/job_trace.h), and once it has ended each refusal is
// explained (explain/explain.h) in the words of the command that started
// it: policy fields for `run`, options for `cage`. Off by default: tracing
// every file and network call slows a build (bench/explain.sh measures it).
//
// The logs go to a private directory (0700, made with mkdtemp) that no
// job may write: the tracer, which may be root, creates a file per
// process there, and a job able to plant a link at such a name would have
// it written through. A directory inside one of the job's writable grants
// is refused, and it is removed once read.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sandbox/cli/job_io.h"
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
  ~JobExplainer();  // removes the logs

  // Checks the tracer, makes the private directory and sets hooks.trace.
  // Nothing, one line on stderr and the exit status in `exit` when it
  // cannot be done: 64 with --debug, 70 where it cannot be done here.
  static std::unique_ptr<JobExplainer> Prepare(const Policy& policy, Speaker speaker, cage::JobHooks& hooks, int* exit);

  // Once the job has ended: the `explain` member of --json and the lines
  // for stderr.
  JobAfterword Explain() const;

 private:
  JobExplainer() = default;
  const Policy* policy_ = nullptr;
  Speaker speaker_ = Speaker::kPolicy;
  std::string dir_;
  std::shared_ptr<cage::JobTrace> trace_;
};

}  // namespace oarbank
