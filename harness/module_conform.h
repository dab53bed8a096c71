// `oarbank-conform module MANIFEST -- RUNNER_SUITE_ARGV`
// (the module contract, "Testing your module"): runs a module's runner
// suite under this host's backend with exactly the grants its manifest
// declares, and when the suite fails, explains each refusal the cage
// caused: what was reached and which grant would have allowed it, or that
// none can (sandbox/explain/explain.h). It also prints the portability lint for every
// platform the manifest declares (portability.h).
//
// The run: a throw-away job tree (work, work/tmp, data; a listening broker
// socket when containers are requested) owned by the suite's uid, the
// Policy a runner job would get (BuildPolicyJson: the author's test
// approves nothing and runs on no node), OARBANK_TOOLS_FILE for the
// requested tools, the module's built environment, and
// `strace -f -ff -y` (from outside the cage) around
// `oarbank-agent sandbox-exec POLICY -- ARGV`.
//
// Exit status: 0 the suite passed, 1 it failed (explained), 64 a bad
// manifest, registry or usage, 70 the launcher refused to run it here (the
// line says which capability).
#pragma once

#include <string>
#include <vector>

namespace oarbank {

struct ModuleConformOptions {
  std::string agent;  // oarbank-agent
  std::string manifest;
  std::vector<std::string> argv;  // the runner suite
  std::string bundle;             // default: the manifest's directory
  std::string registry;           // the operator's tool registry (needed when tools are requested)
  int uid = -1;                   // the suite's uid (root only may choose); -1: this process's
  std::string out = "conform-module-report";
  std::string strace = "/usr/bin/strace";
  double timeout_s = 600;
  bool keep = false;  // keep the job tree (its path is printed)
};

int RunModuleConform(const ModuleConformOptions& options);

}  // namespace oarbank
