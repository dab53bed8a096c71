// Subordinate id ranges for the broker's containers: each live job gets a
// range of its own, so container uid N of one job is never container uid N
// of another, and container root is never a host account.
//
// The ranges are slots of kSubidRangeSize ids in a block no account uses,
// [kSubidBlockBase, kSubidBlockBase + kSubidRanges * kSubidRangeSize): the
// broker refuses to start when /etc/passwd, /etc/group, /etc/subuid or
// /etc/subgid name an id in it. Who holds which slot is one registry, a
// trust file (trust_file.h: root-owned, written atomically, read-modify-
// written under its flock) at kDefaultSubidRegistry, one line per lease:
//   <slot> <owner pid> <owner start time> <job>
// The owner is the job's broker watchdog (sandbox/broker/server.h); a lease is live while
// that very process (pid and start time, from /proc/<pid>/stat) exists.
// Acquiring drops the leases of processes that are gone, so a crash never
// leaks a range for longer than its owner lives; releasing drops the owner's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/common/read_file.h"

namespace oarbank::broker {

inline constexpr uint32_t kSubidBlockBase = 100000000;
inline constexpr uint32_t kSubidRangeSize = 65536;
inline constexpr uint32_t kSubidRanges = 4096;  // the block ends below 2^32 - 1
inline constexpr const char* kDefaultSubidRegistry = "/run/oarbank/subid-ranges";

struct SubidLease {
  uint32_t slot = 0;
  pid_t pid = 0;
  unsigned long long start_time = 0;  // /proc/<pid>/stat field 22
  std::string job;
  uint32_t base() const { return kSubidBlockBase + slot * kSubidRangeSize; }
};

// The registry's text, and back. A malformed line is an error (a registry
// nobody can read must not hand out ranges as if it were empty).
Expected<std::vector<SubidLease>> ParseSubidRegistry(const std::string& text);
std::string FormatSubidRegistry(const std::vector<SubidLease>& leases);

// The pure allocator: drops the leases `alive` says are gone, then gives
// `job`/`pid` the lowest free slot. nullopt when all kSubidRanges are held.
std::optional<SubidLease> AllocateSubids(std::vector<SubidLease>& leases, const std::string& job, pid_t pid,
                                         unsigned long long start_time,
                                         const std::function<bool(const SubidLease&)>& alive);

// The start time of a running process, or nullopt when it is gone (or its
// /proc/<pid>/stat cannot be read).
std::optional<unsigned long long> ProcessStartTime(pid_t pid);
// What a /proc/<pid>/stat text says of its process: its state is Z, and
// its start time (field 22); nullopt for a text without them.
struct ProcessStat {
  bool zombie = false;
  unsigned long long start_time = 0;
};
std::optional<ProcessStat> ParseProcessStat(const std::string& stat);
// Whether the lease's owner (pid and start time) still runs, from its
// /proc/<pid>/stat. Only a stat that is absent, a zombie's, or another
// start time frees the lease: one that cannot be read or parsed keeps it
// (fails closed: a range is never handed out while its owner may live).
bool LeaseOwnerAliveFrom(const HostFile& stat, const SubidLease& lease);
bool LeaseOwnerAlive(const SubidLease& lease);

// Why the block is not free for the broker ("" when no account uses it):
// reads passwd, group, subuid and subgid in `etc`. Fails closed: an absent
// or unreadable passwd or group, an unreadable subuid or subgid, or a line
// whose id or range it cannot read is a reason too.
std::string SubidBlockConflict(const std::string& etc = "/etc");

// Takes a range for `job` owned by `pid` in the registry at `registry`.
Expected<SubidLease> AcquireSubids(const std::string& registry, const std::string& job, pid_t pid);
// Drops every lease `pid` holds; "" or what failed.
std::string ReleaseSubids(const std::string& registry, pid_t pid);
// The live leases (for tests and status).
Expected<std::vector<SubidLease>> LiveSubidLeases(const std::string& registry);

}  // namespace oarbank::broker
