// The battery's network world, for its egress-any policy: "public" test
// hosts and decoys on every non-public address class that can be assigned,
// with no route off the machine.
//
//   up   a network namespace of the battery's own, which the battery process
//        enters (so every run, unconfined or confined, and every supervisor
//        with its user-mode stack, starts there): its loopback and its own
//        addresses (kHost4, kHost6, and kHostPublic4, kHostPublic6 inside the
//        public range) stand for the host's, and the battery listens on them. Its only uplink is a veth to
//   pub  which holds the public test hosts (kPublic4 and its NAT64 form
//        kPublic6, inside kPublicRange, which the battery declares public to
//        `run` with --egress-test-public-range; `run` accepts nothing outside
//        198.18.0.0/15 there) and the decoys (Decoys4, Decoys6), each
//        listening on kEgressPort, TCP and UDP.
//
// Every decoy and every host address logs what reaches it (world.h
// Listeners), so "the decoy saw nothing" is checked at the decoy, not only
// by the probe's errors. The public hosts answer instead (a server of their
// own): through a user-mode stack, what a probe sent may still be on its
// way when it exits, and only an answer proves delivery.
// Both namespaces go when the battery exits: nothing is named in /run/netns.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {

class Listeners;

inline constexpr char kPublicRange[] = "198.19.0.0/24";
inline constexpr char kPublic4[] = "198.19.0.2";
inline constexpr char kPublic6[] = "64:ff9b::c613:2";  // 64:ff9b::198.19.0.2
inline constexpr char kHost4[] = "198.18.0.1";         // up's own veth address
inline constexpr char kHost6[] = "fd99::1";
// up's own addresses inside the declared public range (and its NAT64 form):
// only the ruleset's host-address rule keeps a job from these.
inline constexpr char kHostPublic4[] = "198.19.0.1";
inline constexpr char kHostPublic6[] = "64:ff9b::c613:1";
inline constexpr char kStackGateway4[] = "10.0.2.2";  // slirp4netns's gateway, seen from the job
inline constexpr int kEgressPort = 4443;

struct Decoy {
  const char* address;
  const char* why;  // the class it stands for
};
// IPv4 (and one IPv4-mapped) and IPv6 decoys, each assigned in pub.
const std::vector<Decoy>& Decoys4();
const std::vector<Decoy>& Decoys6();

struct NetworkWorld {
  UniqueFd pub;              // pub's network namespace (its listeners also hold it)
  pid_t public_server = -1;  // the public hosts' server, in pub (killed with this)
  NetworkWorld() = default;
  NetworkWorld(const NetworkWorld&) = delete;
  NetworkWorld& operator=(const NetworkWorld&) = delete;
  ~NetworkWorld();
};

// Builds both namespaces and moves this process into up (on failure it
// stays, or is put back, where it was, and `listeners` may hold sockets
// that will never hear anything); adds the public
// and decoy listeners (in pub) and the host-address listeners on
// kEgressPort (in up: loopback, kHost4, kHost6) to `listeners`. Call it
// before starting threads and before any other socket of the world is made
// (those belong in up). Needs root and iproute2's `ip`. `stand_in_dir` is a
// directory on a filesystem allowing device nodes, in this process's own
// mount namespace: where /dev/net/tun is not usable by every uid (Debian's
// udev makes it 0666; a host without udev leaves the kernel's 0600), a 0666
// node of it is made there and bound over /dev/net/tun, so an unprivileged
// supervisor can start its stack.
Expected<std::unique_ptr<NetworkWorld>> EnterNetworkWorld(Listeners& listeners, const std::string& stand_in_dir);

}  // namespace oarbank
