// The egress-any job's network: a network namespace of its own whose only
// way out is a user-mode network stack the supervisor runs outside the
// cage, filtered by an nftables ruleset installed before the launcher is
// forked.
//
//   supervisor (JobNetwork::Prepare), right after it forks the keeper
//     starts oarbank-netfilter (libnftables, netfilter_main.cc), once for
//     the whole job, which loads while the keeper clones the job's init
//   init (pid 1 of the job, in the job's fresh user and network namespaces)
//     tells the supervisor its namespaces exist and waits for "go"
//   supervisor (JobNetwork::Start)
//     opens /proc/<init>/ns/{user,net} and hands both to the helper, which
//     joins them and makes tap0 there, persistent, so the stack's exit
//     does not wait on the kernel unregistering it (the namespace's
//     teardown does, asynchronously); starts slirp4netns on that namespace
//     (tap0 10.0.2.100/24, resolver 10.0.2.3 and fd00::3,
//     --disable-host-loopback: the gateway 10.0.2.2 is not the host's
//     loopback, and the ruleset drops it anyway) and, while it starts, has
//     the helper install RulesetText (job_ruleset.h): out
//     only to public addresses and the stack's resolver, in only replies,
//     whatever the namespace held before (it begins with a flush), in one
//     transaction; the helper answers the namespace's nftables generation
//     after it, and refuses unless that install is the one change the
//     kernel counted across it. Once the stack is ready and the ruleset
//     installed, "go": init forks the launcher. Until then nothing of the
//     job's runs: init waits, and is all there is in the namespace.
//   gate (JobNetwork::Verify)
//     has the helper wait (at most 3 s) for the stack's IPv6 address, which
//     follows its router advertisement while the launcher sets itself up,
//     then read the generation again, and refuses the job unless it is the
//     install's (the kernel moves it on with every change committed to the
//     namespace's ruleset, even one undone since: nothing has changed the
//     ruleset since it was installed) and the stack still runs.
//   end (JobNetwork::End)
//     closes the stack's exit fd (slirp4netns exits; it also does when the
//     supervisor dies) while the helper reads the drop counter, ends the
//     helper, reaps both.
//
// The helper waits between those requests, while the module runs, holding
// its request socket and its log and nothing else (no netlink socket, no
// namespace descriptor); it is in the supervisor's pid namespace, where
// nothing in the job can name it.
//
// The job holds no capability in its namespaces, seccomp refuses netlink
// sockets and new namespaces: it cannot change the rules.
//
// Why slirp4netns and not pasta: its addressing inside the job is fixed
// (10.0.2.0/24, fd00::/64) and independent of the host, where pasta copies
// the host's addresses and routes into the job; it maps nothing inbound
// unless asked through an API socket, which is never opened here, where
// pasta forwards ports by default; and it confines itself (--enable-seccomp,
// and --enable-sandbox under a root agent, the only one that maps uid 0 in
// the job's user namespace, which that option needs), which matters for a
// process that parses every packet the job sends. The cost is throughput (bench/egress_any.sh).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/host/host_facts.h"

namespace oarbank {

inline constexpr char kJobStackPath[] = "/usr/bin/slirp4netns";
inline constexpr char kTunDevicePath[] = "/dev/net/tun";

// Why this process (by its effective ids) cannot open the tun device at
// `path` for reading and writing, which the stack needs for the job's tap
// device and opens with the agent's own credentials; nullopt when it can.
// Where the device is root's only (mode 0600, as some hosts ship it) an
// unprivileged agent has no other way to a tap device: egress-any is
// refused with this line rather than failing mid-start.
std::optional<std::string> TunDeviceGap(const std::string& path = kTunDevicePath);

struct JobNetworkSettings {
  std::vector<egress::Cidr> test_public;  // egress::ParseTestPublicRange (run --egress-test-public-range)
};

// Whether egress-any can be enforced here: the stack, the helper and an
// nftables ruleset in a fresh user+network namespace, tried for real once
// per process. `missing` names the part that is not there.
struct JobNetworkProbe {
  bool ok = false;
  std::string missing;  // "user namespaces", "the user-mode stack (slirp4netns)", "nftables (oarbank-netfilter)"
  std::string detail;
};
const JobNetworkProbe& ProbeJobNetwork();
// Only whether the stack and the helper are there and trusted (no trial).
JobNetworkProbe JobNetworkParts();

// The facts a supervisor places a policy with (host_facts.h): supervised,
// and, when `probe` (only for a policy, or a report, that needs it),
// ProbeJobNetwork's answer with `trial`, else JobNetworkParts's. A job
// needs no trial: its own start is one, and a part that fails there
// refuses the job with 70 naming it, as the placement would.
HostFacts::JobNetworkFacts SupervisedJobNetworkFacts(bool probe, bool trial = true);

// The helper's path: beside the running binary, else the installed one.
std::string NetfilterHelperPath();
// The helper `program` (an oarbank-agent, links resolved) runs: beside it,
// else the installed one.
std::string NetfilterHelperPathFor(const std::string& program);
// Names in `facts` the stack and the helper `program` would run, which the
// battery attestation binds for the egress-any classes.
void NameJobNetworkParts(HostFacts::JobNetworkFacts& facts, const std::string& program = "/proc/self/exe");

class NetfilterSession;  // job_network.cc

class JobNetwork {
 public:
  // Checks the stack, the helper and the tun device, and starts the helper,
  // before the job's namespaces exist: its dynamic loading (about 1 ms)
  // overlaps the job's clone instead of the stack's start. An Error's
  // `where` names the part that failed ("nftables", "slirp4netns").
  static Expected<std::unique_ptr<JobNetwork>> Prepare();
  // `init` is alive, its id maps are written and it waits for "go": tap0,
  // the stack and the ruleset, in Start's stages (below). Once only.
  std::optional<Error> Start(pid_t init, const JobNetworkSettings& settings,
                             std::chrono::steady_clock::time_point deadline);
  ~JobNetwork();
  JobNetwork(const JobNetwork&) = delete;
  JobNetwork& operator=(const JobNetwork&) = delete;

  // "" when the kernel holds exactly the ruleset installed and the stack
  // runs; otherwise why not. Waits for the stack's IPv6 address first.
  std::string Verify();
  // Ends the job's network once the job is gone: the packets the ruleset
  // dropped (-1: unreadable), the stack and the helper stopped and reaped.
  long long End();
  // Stops the stack and the helper and reaps them; idempotent.
  void Stop();

 private:
  JobNetwork() = default;
  // Start's stages, in this order: tap0 made by the helper (started by
  // Prepare) in the namespaces it is handed; the stack started on the
  // namespace; the helper asked to install the ruleset; the stack awaited
  // until it is ready, while the ruleset goes in; the ruleset's install
  // awaited, with the generation it made (which the gate, Verify, must find
  // again). The job's init is released only after all of them.
  //
  // MakeTap hands the helper the job's user and network namespaces, which
  // it joins, and has it make the stack's tap0 there, persistent (the stack
  // attaches to it: a tap device of this name and flags is what it asks
  // for), before the stack starts. A tap that
  // ends with its last descriptor is unregistered in that close, which
  // waits for an RCU barrier (about 15 ms here) in the stack's exit and so
  // in every egress-any job's end; a persistent one goes with the job's
  // network namespace instead, which the kernel tears down asynchronously
  // once the job and the supervisor have let go of it. Nothing in the job
  // can attach to it: its /dev has no net/tun, and a tap takes one
  // attachment, the stack's.
  std::optional<Error> MakeTap(std::chrono::steady_clock::time_point step);
  std::optional<Error> StartStack();
  std::optional<Error> StartRules(const JobNetworkSettings& settings, std::chrono::steady_clock::time_point step);
  std::optional<Error> AwaitStack(std::chrono::steady_clock::time_point step);
  std::optional<Error> AwaitRules(std::chrono::steady_clock::time_point step);
  bool joined_ = false;  // the helper was handed the namespaces (it has a ruleset to count)
  UniqueFd userns_, netns_;
  // oarbank-netfilter, from the ruleset's install to the drop counter.
  std::unique_ptr<NetfilterSession> netfilter_;
  UniqueFd exit_w_;       // slirp4netns --exit-fd: it exits when this closes
  UniqueFd stack_ready_;  // slirp4netns --ready-fd, until it is ready
  UniqueFd stack_log_;    // its stderr (a memfd)
  pid_t stack_ = -1;
  uint32_t generation_ = 0;  // the namespace's nftables generation right after the install
};

}  // namespace oarbank
