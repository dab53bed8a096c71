#include "sandbox/cli/explain_option.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/path_within.h"
#include "sandbox/explain/trace_log.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

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

JobExplainer::~JobExplainer() {
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
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
  const char* base = "/tmp";
  for (const auto& writable : WritableGrants(policy))
    if (IsAtOrBelow(base, writable)) {
      fprintf(stderr, "sandbox: refused: --explain: its logs would lie in %s, which the job may write\n", base);
      return nullptr;
    }
  std::string tmpl = std::string(base) + "/oarbank-explain-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    fprintf(stderr, "sandbox: refused: --explain: mkdtemp %s: %s\n", tmpl.c_str(), strerror(errno));
    return nullptr;
  }
  std::unique_ptr<JobExplainer> e(new JobExplainer());
  e->policy_ = &policy;
  e->speaker_ = speaker;
  e->dir_ = tmpl;
  e->trace_ = std::make_shared<cage::JobTrace>();
  e->trace_->command = StraceCommand(kStracePath, e->dir_ + "/t");
  e->trace_->log_path = e->dir_ + "/strace.err";
  hooks.trace = e->trace_;
  return e;
}

JobAfterword JobExplainer::Explain() const {
  const ModuleTrace trace = ReadModuleTrace(dir_ + "/t", TraceStart::kFirstExec);
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
  JobAfterword out;
  out.json = {
      {"module_ran", trace.module_ran},
      {"complete", trace_->failure.empty()},
      {"incomplete", trace_->failure.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(trace_->failure)},
      {"refusals", Denials(denials)},
      {"not_the_cage", Denials(others)},
      {"dropped", dropped}};
  if (!trace_->failure.empty()) out.lines.push_back("explain: incomplete: " + trace_->failure);
  for (const auto& d : denials) out.lines.push_back(DenialLine(d));
  for (const auto& d : others) out.lines.push_back("not the cage: " + DenialLine(d));
  if (dropped > 0) out.lines.push_back("explain: " + std::to_string(dropped) + " more refusals left out");
  if (denials.empty() && trace.module_ran) out.lines.push_back("explain: the cage refused nothing");
  return out;
}

}  // namespace oarbank
