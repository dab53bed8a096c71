// Test-only pause points, compiled into oarbank-agent-faulty (and the
// library it links) and never into oarbank-agent: with
// OARBANK_FAULT_PAUSE=<point> and OARBANK_FAULT_PAUSE_FILE=<file>, the
// process that reaches <point> writes "<pid> <a> <b>\n" to <file> (whole,
// by rename) and waits until <file>.go exists (at most 60 s), so a test can
// kill the agent inside a window, or change the world there, at a known
// moment. Allocation-free and lock-free: safe in the keeper, init and the
// launcher after a fork.
#pragma once

#ifdef OARBANK_FAULT_INJECTION
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#endif

namespace oarbank {

#ifdef OARBANK_FAULT_INJECTION
inline void FaultPause(const char* point, long a = 0, long b = 0) {
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
    timespec ms {0, 1000000};
    nanosleep(&ms, nullptr);
  }
}
#else
inline void FaultPause(const char*, long = 0, long = 0) {}
#endif

}  // namespace oarbank
