// The world the battery runs in: a job's directories (bundle holding the
// probes, runtime, work, data, tmp), a secret outside every grant, host
// listeners (pathname and abstract unix, TCP on 127.0.0.1 and ::1, a stand-in
// proxy, UDP), outside processes, an inherited fd, a setuid helper, an outer
// cgroup and a GPU stand-in. Everything a probe might reach is also watched
// from outside, so a confined run's effect is seen even if a probe lies.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "harness/network_world.h"
#include "sandbox/common/expected.h"

namespace oarbank {

// `address` (IPv4 or IPv6 text) and `port` as a socket address; false if
// the text is not an address.
bool ParseSocketAddress(const std::string& address, int port, sockaddr_storage& out, socklen_t& len);

// Records every connection or datagram that reached the host's sockets, with
// the first line it carried (probes send their own name first), so a late
// connection is attributed to the probe that made it.
class Listeners {
 public:
  Listeners();
  ~Listeners();
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  // Each returns false on failure (errno set). Ports are chosen by the kernel.
  bool AddUnix(const std::string& name, const std::string& path, int type = SOCK_STREAM);
  bool AddAbstract(const std::string& name, const std::string& abstract);
  // A TCP (SOCK_STREAM) or UDP (SOCK_DGRAM) listener on `address`:`port`
  // (0: the kernel chooses); returns the port or -1.
  int AddAt(const std::string& name, const std::string& address, int port, int type);
  int AddTcp(const std::string& name, int port);  // 127.0.0.1 and ::1, same port; returns it or -1
  int AddUdp(const std::string& name);            // 127.0.0.1; returns the port or -1
  // Accepts everything pending, then hands over the arrivals that name
  // `probe` (or nothing): "listener: first line" each. Thread-safe: the
  // battery's workers each run a different probe.
  std::vector<std::string> Take(const std::string& probe);

 private:
  struct Arrival {
    std::string listener;
    std::string said;
  };
  struct Socket {
    int fd;
    std::string name;
    bool stream;
  };
  std::vector<Socket> sockets_;
  std::mutex mutex_;
  std::vector<Arrival> pending_;
};

// Processes outside the cage, one per identity, that block every signal, so
// that a signal reaching one stays pending where /proc shows it. They judge a
// probe that says "sent" (a signal whose delivery no call of it can see).
// Each battery worker owns its own set: a pending signal then names the
// worker's current probe, never one running beside it.
class SignalSinks {
 public:
  SignalSinks() = default;
  SignalSinks(const SignalSinks&) = delete;
  SignalSinks& operator=(const SignalSinks&) = delete;
  ~SignalSinks();
  pid_t For(uid_t uid);  // started on first use; -1 if it could not be
  // The signals pending at uid's sink (bit N-1 for signal N); a sink that
  // has any is replaced, so the next run starts from none. An error when the
  // sink is not a live process of uid blocking every signal: nothing could
  // have shown there, so the run proves nothing.
  Expected<uint64_t> TakePending(uid_t uid);

 private:
  std::map<uid_t, pid_t> pids_;
};

struct World {
  std::string root;
  std::string bundle, runtime, work, data, outside, secret;
  std::string unix_socket, unix_dgram_socket, abstract_name, broker_socket;
  std::string unix_socket_work;                   // a host socket inside the work grant
  std::string unix_socket_tmp, unix_socket_data;  // and inside the tmp and data grants
  std::string setuid_helper, cgroup_dir, gpu_node;
  int tcp_port = 0, proxy_port = 0, udp_port = 0;
  std::map<uid_t, pid_t> outside_pid;  // one per identity the battery runs as
  int inherited_fd = -1;               // a low fd (7) and one above select()'s 1024, both on the secret
  int inherited_high_fd = -1;
  int sysv_msg_id = -1;       // a System V message queue, mode 0666
  std::string mqueue_name;    // a POSIX message queue, mode 0666
  std::string host_shm_file;  // a file in the host's /dev/shm, mode 0666
  std::string host_pty;       // a pty of the host's devpts (/dev/pts/N), mode 0666; the world holds its master
  int host_pty_master = -1;
  std::string env_secret;  // the agent's own secret, value "oarbank-secret-..."
  std::unique_ptr<Listeners> listeners;
  std::vector<std::string> notes;  // what could not be set up, said in the report
  bool root_is_tmpfs = false;      // root is a tmpfs in the battery's mount namespace
  std::string created_dev_dri;     // /dev/dri this run made for the GPU stand-in (left in place)
  // The public test hosts and decoys (network_world.h), where egress-any
  // can be enforced; null elsewhere.
  std::unique_ptr<NetworkWorld> net;

  ~World();
};

// Builds the world on a tmpfs mounted over a fresh /tmp directory, in a
// mount namespace of the calling process's own (it unshares one: call it
// before starting threads); `probe_dir` holds the built probes (and
// helpers/). With `network`, it first moves this process into the network
// world (network_world.h), so that every socket of the world, and every
// run, is in its up namespace. Needs root.
Expected<std::unique_ptr<World>> MakeWorld(const std::string& probe_dir, const std::vector<uid_t>& uids, bool network);

// A battery policy fixture with @ROOT@ and @PROXY_PORT@ filled in, written
// into the world; returns its path.
Expected<std::string> MaterializePolicy(const World& world, const std::string& fixture_path, const std::string& name);

// Everything a confined run could have changed, read from outside.
struct Evidence {
  std::vector<std::string> arrivals;  // Listeners::Take(probe) at this observation
  std::set<std::string> bundle_files;
  std::set<std::string> secret_files;   // the world's secret directory
  std::set<std::string> outside_files;  // the run's own directory outside the grants
};
// Lists the bundle and the secret directory again unless `shared` is given:
// a worker's observation after one run serves as the next run's "before"
// (the directories every run sees are listed once per run, not twice). Only
// an escape changes them in between, and an escape fails the battery in
// whichever run's evidence it shows.
Evidence ObserveWorld(World& world, const std::string& outside_dir, const std::string& probe,
                      const Evidence* shared = nullptr);
// What a run changed between two observations, one line each.
// In the directories all runs share, a file named after another probe
// ("<probe>.<pid>") is that probe's (its unconfined run escapes on purpose,
// perhaps in the other worker meanwhile) and not this run's evidence.
std::vector<std::string> CompareEvidence(const Evidence& before, const Evidence& after, const std::string& probe);

}  // namespace oarbank
