// Command-line pieces that more than one of oarbank-agent's subcommands
// takes: --landlock-abi-max, --env NAME=VALUE, the test resolver file and
// the job's egress proxy options.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sandbox/common/exit_codes.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/egress/resolver.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

// --timeout S (run, cage): the supervisor's poll steps in milliseconds
// (plus the kill), so 10 ms is the least it means.
inline constexpr double kMinTimeoutSeconds = 0.01;
inline constexpr double kMaxTimeoutSeconds = 1e7;

// One usage line on stderr; the exit status for it (kExitUsage, 64).
inline int UsageLine(const std::string& line) {
  fprintf(stderr, "usage: %s\n", line.c_str());
  return kExitUsage;
}

// --landlock-abi-max N (sandbox-exec, sandbox-report, run, cage): -1, the
// default, is what the kernel offers.
inline CLI::Option* AddLandlockAbiMax(CLI::App* sub, int& abi_cap) {
  return sub
      ->add_option("--landlock-abi-max", abi_cap,
                   "Use at most this Landlock ABI (testing: can only lower what the kernel offers)")
      ->check(CLI::Range(0, 1000));
}

// A resolver file for an egress proxy (--egress-test-resolver, egress-proxy's
// --test-resolver): it decides where an allowed name leads, so only the
// test-only build, oarbank-agent-faulty, takes one; the installed agent
// refuses it with one line (exit 64), unlisted in --help.
inline CLI::Option* AddTestResolver(CLI::App* sub, const char* name, std::string& file, const char* help) {
#ifdef OARBANK_FAULT_INJECTION
  return sub->add_option(name, file, help);
#else
  (void)help;
  const std::string option = name;
  return sub->add_option(name, file)->group("")->each([option](const std::string&) {
    throw CLI::ValidationError(option, "a resolver file is taken by the test-only build (oarbank-agent-faulty) alone");
  });
#endif
}

// NAME=VALUE options (--env) into the variables the job's environment
// names; false (and one line) for one without a name.
inline bool ParseEnvOptions(const std::vector<std::string>& options, std::map<std::string, std::string>& named) {
  for (const auto& kv : options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      fprintf(stderr, "usage: --env: expected NAME=VALUE, got %s\n", kv.c_str());
      return false;
    }
    named[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return true;
}

// The job's egress proxy (run, cage): the public test ranges and (the
// test-only build's) resolver file. False after one line.
inline bool SetEgress(JobEgressOptions egress, const std::vector<std::string>& test_public,
                      const std::string& test_resolver, cage::JobHooks& hooks) {
  for (const auto& r : test_public) {
    auto cidr = egress::ParseTestPublicRange(r);
    if (!cidr.ok()) {
      fprintf(stderr, "usage: --egress-test-public-range %s: %s\n", r.c_str(), cidr.error().what.c_str());
      return false;
    }
    egress.test_public.push_back(cidr.value());
  }
  if (!test_resolver.empty()) egress.resolver = std::make_shared<egress::FileResolver>(test_resolver);
  hooks.egress = std::make_shared<const JobEgressOptions>(std::move(egress));
  return true;
}

}  // namespace oarbank
