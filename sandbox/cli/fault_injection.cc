#include "sandbox/cli/fault_injection.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "sandbox/cli/mutation_points.h"
#include "sandbox/common/fault_hooks.h"

namespace oarbank {
namespace {

// Allocation-free and lock-free: runs in the keeper, init and the launcher
// after a fork. The variables are read at each call, as a test may set
// them for one process only.
void PauseAt(const char* point, long a, long b) {
  const char* want = getenv("OARBANK_FAULT_PAUSE");
  const char* file = getenv("OARBANK_FAULT_PAUSE_FILE");
  if (want == nullptr || file == nullptr || strcmp(want, point) != 0) return;
  char tmp[4096], go[4096], text[96];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", file, static_cast<int>(getpid()));
  snprintf(go, sizeof go, "%s.go", file);
  const int n = snprintf(text, sizeof text, "%d %ld %ld\n", static_cast<int>(getpid()), a, b);
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, text, static_cast<size_t>(n));
  close(fd);
  rename(tmp, file);
  for (int waited = 0; waited < 60000 && access(go, F_OK) != 0; ++waited) {
    timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

// OARBANK_FAULT_SKIP_STEP names one step or several, comma-separated (a
// pair mutant removes two layers at once).
bool SkipStep(const char* step) {
  const char* skip = getenv("OARBANK_FAULT_SKIP_STEP");
  const size_t len = strlen(step);
  for (const char* at = skip; at != nullptr && *at != '\0';) {
    const char* comma = strchr(at, ',');
    const size_t n = comma != nullptr ? static_cast<size_t>(comma - at) : strlen(at);
    if (n == len && strncmp(at, step, len) == 0) return true;
    at = comma != nullptr ? comma + 1 : nullptr;
  }
  return false;
}

}  // namespace

void InstallFaultHooks() {
  fault_hooks.pause = PauseAt;
  fault_hooks.skip_step = SkipStep;
  fault_hooks.mutate_plan = InjectFaults;
  if (const char* end = getenv("OARBANK_FAULT_SYSCALL_TABLE_END")) fault_hooks.syscall_table_end = atoi(end);
  fault_hooks.landlock_missing = getenv("OARBANK_FAULT_LANDLOCK_MISSING");
}

void InjectFaults(Plan& plan) {
  if (const char* syscall = getenv("OARBANK_FAULT_DROP_SECCOMP")) {
    std::erase_if(plan.seccomp, [&](const SeccompRule& r) { return r.syscall == syscall; });
  }
  if (const char* bit = getenv("OARBANK_FAULT_UNHANDLE_FS")) {
    const uint64_t right = 1ull << atoi(bit);
    plan.landlock.handled_fs &= ~right;
    for (auto& rule : plan.landlock.paths) rule.access &= ~right;
  }
  if (getenv("OARBANK_FAULT_UNHANDLE_SCOPES")) plan.landlock.scoped = 0;
  if (getenv("OARBANK_FAULT_WRITABLE_MOUNTS")) plan.read_only_mounts = false;
  if (const char* points = getenv("OARBANK_FAULT_MUTANT")) {
    // One point or several, comma-separated (a pair mutant).
    std::string list = points;
    for (size_t from = 0, comma; from <= list.size(); from = comma + 1) {
      comma = list.find(',', from);
      if (comma == std::string::npos) comma = list.size();
      RemovePlanPoint(list.substr(from, comma - from), plan);
    }
  }
  for (const char* v : {"OARBANK_FAULT_DROP_SECCOMP", "OARBANK_FAULT_UNHANDLE_FS", "OARBANK_FAULT_UNHANDLE_SCOPES",
                        "OARBANK_FAULT_WRITABLE_MOUNTS", "OARBANK_FAULT_SYSCALL_TABLE_END", "OARBANK_FAULT_MUTANT"})
    unsetenv(v);
}

}  // namespace oarbank
