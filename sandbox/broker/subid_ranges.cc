#include "sandbox/broker/subid_ranges.h"

#include <errno.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "sandbox/common/read_file.h"
#include "sandbox/common/trust_file.h"

namespace oarbank::broker {
namespace {

bool ParseUnsigned(const std::string& s, unsigned long long max, unsigned long long* out) {
  if (s.empty() || s.size() > 20) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const unsigned long long next = v * 10 + static_cast<unsigned>(c - '0');
    if (next / 10 != v) return false;
    v = next;
  }
  if (v > max) return false;
  *out = v;
  return true;
}

// Whether [lo, hi) meets the block.
bool MeetsBlock(unsigned long long lo, unsigned long long hi) {
  const unsigned long long b0 = kSubidBlockBase;
  const unsigned long long b1 = b0 + static_cast<unsigned long long>(kSubidRanges) * kSubidRangeSize;
  return lo < b1 && b0 < hi;
}

}  // namespace

Expected<std::vector<SubidLease>> ParseSubidRegistry(const std::string& text) {
  std::vector<SubidLease> leases;
  std::stringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    std::stringstream fields(line);
    std::string slot, pid, start, job, extra;
    fields >> slot >> pid >> start >> job >> extra;
    unsigned long long s = 0, p = 0, t = 0;
    if (!ParseUnsigned(slot, kSubidRanges - 1, &s) || !ParseUnsigned(pid, 1ull << 22, &p) || p == 0 ||
        !ParseUnsigned(start, ~0ull, &t) || job.empty() || !extra.empty())
      return Error{"subid registry", "line " + std::to_string(n) + ": expected <slot> <pid> <start time> <job>"};
    leases.push_back({static_cast<uint32_t>(s), static_cast<pid_t>(p), t, job});
  }
  return leases;
}

std::string FormatSubidRegistry(const std::vector<SubidLease>& leases) {
  std::string text;
  for (const auto& l : leases)
    text +=
        std::to_string(l.slot) + " " + std::to_string(l.pid) + " " + std::to_string(l.start_time) + " " + l.job + "\n";
  return text;
}

std::optional<SubidLease> AllocateSubids(std::vector<SubidLease>& leases, const std::string& job, pid_t pid,
                                         unsigned long long start_time,
                                         const std::function<bool(const SubidLease&)>& alive) {
  std::vector<SubidLease> live;
  std::set<uint32_t> taken;
  for (auto& l : leases)
    if (l.slot < kSubidRanges && !taken.count(l.slot) && alive(l)) {
      taken.insert(l.slot);
      live.push_back(l);
    }
  leases = std::move(live);
  for (uint32_t slot = 0; slot < kSubidRanges; ++slot) {
    if (taken.count(slot)) continue;
    SubidLease lease{slot, pid, start_time, job};
    leases.push_back(lease);
    return lease;
  }
  return std::nullopt;
}

std::optional<ProcessStat> ParseProcessStat(const std::string& stat) {
  // comm may hold spaces and parentheses: fields start after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::stringstream rest(stat.substr(close + 1));
  ProcessStat out;
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
    if (i == 3) out.zombie = field == "Z";
  }
  if (!ParseUnsigned(field, ~0ull, &out.start_time)) return std::nullopt;
  return out;
}

namespace {

HostFile ReadProcessStat(pid_t pid) { return ReadHostFile("/proc/" + std::to_string(pid) + "/stat", 4096); }

}  // namespace

std::optional<unsigned long long> ProcessStartTime(pid_t pid) {
  const HostFile stat = ReadProcessStat(pid);
  const auto parsed = stat.status == HostFileStatus::kRead ? ParseProcessStat(stat.text) : std::nullopt;
  if (!parsed || parsed->zombie) return std::nullopt;  // a zombie holds nothing
  return parsed->start_time;
}

bool LeaseOwnerAliveFrom(const HostFile& stat, const SubidLease& lease) {
  if (stat.status == HostFileStatus::kAbsent) return false;     // the process is gone
  if (stat.status == HostFileStatus::kUnreadable) return true;  // cannot tell: its range stays held
  const auto parsed = ParseProcessStat(stat.text);
  if (!parsed) return true;  // malformed: its range stays held
  return !parsed->zombie && parsed->start_time == lease.start_time;
}

bool LeaseOwnerAlive(const SubidLease& lease) { return LeaseOwnerAliveFrom(ReadProcessStat(lease.pid), lease); }

namespace {

// An account file's size limit: far above any real one, so only a runaway
// file is refused for its size.
constexpr size_t kAccountFileMax = 64 << 20;

// Why one line of an id file (name:x:id:... or name:start:count) is not
// well formed, or its id or range meets the block: "" when neither.
std::string CheckIdLine(const std::string& file, size_t number, const std::string& line, bool range) {
  std::vector<std::string> fields;
  for (size_t at = 0;;) {
    const size_t colon = line.find(':', at);
    fields.push_back(line.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  const std::string where = file + ": line " + std::to_string(number);
  unsigned long long a = 0, b = 0;
  if (range) {
    if (fields.size() != 3 || !ParseUnsigned(fields[1], ~0u, &a) || !ParseUnsigned(fields[2], ~0u, &b))
      return where + ": not name:start:count, so the ranges it gives cannot be checked against the block";
    if (MeetsBlock(a, a + b))
      return file + ": " + fields[0] + "'s range " + fields[1] + ":" + fields[2] +
             " meets the broker's subordinate id block";
    return "";
  }
  if (fields.size() < 3 || !ParseUnsigned(fields[2], ~0u, &a))
    return where +
           ": no numeric id in its third field (a NIS or other entry whose id this file does not give), "
           "so the ids accounts use cannot be checked against the block";
  if (MeetsBlock(a, a + 1))
    return file + ": " + fields[0] + " has id " + fields[2] + ", inside the broker's subordinate id block";
  return "";
}

}  // namespace

std::string SubidBlockConflict(const std::string& etc) {
  // The accounts' files must be there and readable: without them no one can
  // say the block is free. The subordinate id files may be absent (no
  // ranges given), never unreadable or malformed.
  for (const auto& [name, range, required] : {std::tuple{"passwd", false, true}, std::tuple{"group", false, true},
                                              std::tuple{"subuid", true, false}, std::tuple{"subgid", true, false}}) {
    const std::string file = etc + "/" + name;
    const HostFile f = ReadHostFile(file, kAccountFileMax);
    if (f.status == HostFileStatus::kAbsent && !required) continue;
    if (f.status != HostFileStatus::kRead) return f.why + ": cannot tell whether the subordinate id block is free";
    std::stringstream in(f.text);
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (line.empty() || (range && line[0] == '#')) continue;
      if (std::string why = CheckIdLine(file, number, line, range); !why.empty()) return why;
    }
  }
  return "";
}

Expected<SubidLease> AcquireSubids(const std::string& registry, const std::string& job, pid_t pid) {
  if (std::string conflict = SubidBlockConflict(); !conflict.empty()) return Error{"subid block", conflict};
  const auto start = ProcessStartTime(pid);
  if (!start) return Error{"subid registry", "owner pid " + std::to_string(pid) + " is not running"};
  auto lock = TrustLock::Acquire(registry);
  if (!lock.ok()) return lock.error();
  auto text = ReadTrustedFile(registry);
  if (!text.ok()) return text.error();
  auto leases = ParseSubidRegistry(text.value().value_or(""));
  if (!leases.ok()) return Error{registry, leases.error().what};
  std::vector<SubidLease> all = std::move(leases).value();
  auto lease = AllocateSubids(all, job, pid, *start, LeaseOwnerAlive);
  if (!lease)
    return Error{registry, "all " + std::to_string(kSubidRanges) + " subordinate id ranges are held by live jobs"};
  if (auto failed = WriteTrustedFile(registry, FormatSubidRegistry(all), 0600)) return *failed;
  return *lease;
}

std::string ReleaseSubids(const std::string& registry, pid_t pid) {
  auto lock = TrustLock::Acquire(registry);
  if (!lock.ok()) return lock.error().where + ": " + lock.error().what;
  auto text = ReadTrustedFile(registry);
  if (!text.ok()) return text.error().where + ": " + text.error().what;
  auto leases = ParseSubidRegistry(text.value().value_or(""));
  if (!leases.ok()) return registry + ": " + leases.error().what;
  std::vector<SubidLease> kept;
  for (const auto& l : leases.value())
    if (l.pid != pid && LeaseOwnerAlive(l)) kept.push_back(l);
  if (auto failed = WriteTrustedFile(registry, FormatSubidRegistry(kept), 0600))
    return failed->where + ": " + failed->what;
  return "";
}

Expected<std::vector<SubidLease>> LiveSubidLeases(const std::string& registry) {
  auto text = ReadTrustedFile(registry);
  if (!text.ok()) return text.error();
  auto leases = ParseSubidRegistry(text.value().value_or(""));
  if (!leases.ok()) return leases.error();
  std::vector<SubidLease> live;
  for (const auto& l : leases.value())
    if (LeaseOwnerAlive(l)) live.push_back(l);
  return live;
}

}  // namespace oarbank::broker
