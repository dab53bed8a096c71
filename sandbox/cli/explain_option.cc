#include "sandbox/cli/explain_option.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sandbox/common/exit_codes.h"
#include "sandbox/explain/trace_log.h"

namespace oarbank {
namespace {

nlohmann::ordered_json Denials(const std::vector<Denial>& list) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& d : list) out.push_back(DenialJson(d));
  return out;
}

}  // namespace

void AddExplainOption(CLI::App* sub, bool& explain) {
  sub->add_flag("--explain", explain,
                "Trace the job from outside its cage and, once it ends, name each refusal: what was reached, the "
                "layer that refused it, and what would allow it (needs strace; slows the job; not with --debug)");
}

std::unique_ptr<JobExplainer> JobExplainer::Prepare(const Policy& policy, Speaker speaker, cage::JobHooks& hooks,
                                                    int* exit) {
  *exit = kExitNotEnforced;
  if (policy.debug()) {
    fprintf(stderr, "sandbox: --explain: not with --debug (a traced process cannot be traced again)\n");
    *exit = kExitUsage;
    return nullptr;
  }
  if (access(kStracePath, X_OK) != 0) {
    fprintf(stderr, "sandbox: refused: --explain: needs strace at %s (Debian package strace)\n", kStracePath);
    return nullptr;
  }
  std::unique_ptr<JobExplainer> e(new JobExplainer());
  for (UniqueFd* fd : {&e->log_, &e->err_}) {
    fd->Reset(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!fd->valid()) {
      fprintf(stderr, "sandbox: refused: --explain: a file with no name in /tmp (O_TMPFILE): %s\n", strerror(errno));
      return nullptr;
    }
  }
  e->policy_ = &policy;
  e->speaker_ = speaker;
  e->trace_ = std::make_shared<cage::JobTrace>();
  e->trace_->command = MergedStraceCommand(kStracePath, cage::kTracerLogFd);
  e->trace_->log_fd = e->log_.get();
  e->trace_->err_fd = e->err_.get();
  hooks.trace = e->trace_;
  return e;
}

JobAfterword JobExplainer::Explain() const {
  try {
    return ExplainTrace();
  } catch (const std::exception& e) {
    // The job's own result is printed whatever the log held.
    JobAfterword out;
    const std::string why = std::string("the tracer's log could not be read: ") + e.what();
    out.json = {{"module_ran", false},
                {"complete", false},
                {"incomplete", why},
                {"refusals", nlohmann::ordered_json::array()},
                {"not_the_cage", nlohmann::ordered_json::array()},
                {"dropped", 0}};
    out.lines.push_back("explain: incomplete: " + why);
    return out;
  }
}

JobAfterword JobExplainer::ExplainTrace() const {
  const ModuleTrace trace = ReadMergedTrace(log_.get(), TraceStart::kFirstExec);
  ExplainContext ctx;
  ctx.speaker = speaker_;
  ctx.policy = policy_;
  ctx.plan = &trace_->plan;
  ctx.homes = HostHomes();
  ctx.supervised = true;
  std::vector<Denial> others;
  size_t dropped = 0;
  std::vector<Denial> denials = ExplainDenials(trace.calls, ctx, &others, &dropped);
  {
    std::lock_guard lock(trace_->mu);
    for (const auto& line : trace_->proxy_refusals)
      if (auto d = ExplainProxyRefusal(line, speaker_)) {
        if (denials.size() < kMaxDenials)
          denials.push_back(std::move(*d));
        else
          ++dropped;
      }
    dropped += trace_->proxy_dropped;
  }
  std::string incomplete = trace_->failure;
  for (const auto& [missing, why] :
       {std::pair{trace.cut, "the log held more calls than are read (later ones are missing)"},
        {trace.untraced, "the job made a process with CLONE_UNTRACED, whose calls the tracer does not see"}})
    if (missing) incomplete += std::string(incomplete.empty() ? "" : "; ") + why;
  JobAfterword out;
  out.json = {{"module_ran", trace.module_ran},
              {"complete", incomplete.empty()},
              {"incomplete", incomplete.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(incomplete)},
              {"refusals", Denials(denials)},
              {"not_the_cage", Denials(others)},
              {"dropped", dropped}};
  if (!incomplete.empty()) out.lines.push_back("explain: incomplete: " + incomplete);
  for (const auto& d : denials) out.lines.push_back(DenialLine(d));
  for (const auto& d : others) out.lines.push_back("not the cage: " + DenialLine(d));
  if (dropped > 0) out.lines.push_back("explain: " + std::to_string(dropped) + " more refusals left out");
  if (!trace.module_ran)
    out.lines.push_back("explain: the job's program never ran");
  else if (denials.empty())
    out.lines.push_back("explain: the cage refused nothing");
  return out;
}

}  // namespace oarbank
