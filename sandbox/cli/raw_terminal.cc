#include "sandbox/cli/raw_terminal.h"

#include <unistd.h>

namespace oarbank {
namespace {

constexpr int kRestoringSignals[4] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};

// One raw terminal per process: what its handlers restore.
volatile sig_atomic_t g_fd = -1;
termios g_saved{};

void RestoreAndDie(int sig) {
  if (g_fd >= 0) tcsetattr(g_fd, TCSANOW, &g_saved);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

RawTerminal::RawTerminal(int fd) {
  if (g_fd >= 0 || !isatty(fd) || tcgetattr(fd, &g_saved) != 0) return;
  g_fd = fd;
  struct sigaction sa {};
  sa.sa_handler = RestoreAndDie;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 4; ++i) sigaction(kRestoringSignals[i], &sa, &old_[i]);
  termios raw = g_saved;
  cfmakeraw(&raw);
  if (tcsetattr(fd, TCSADRAIN, &raw) != 0) {
    for (int i = 0; i < 4; ++i) sigaction(kRestoringSignals[i], &old_[i], nullptr);
    g_fd = -1;
    return;
  }
  active_ = true;
}

RawTerminal::~RawTerminal() {
  if (!active_) return;
  tcsetattr(g_fd, TCSADRAIN, &g_saved);
  for (int i = 0; i < 4; ++i) sigaction(kRestoringSignals[i], &old_[i], nullptr);
  g_fd = -1;
}

}  // namespace oarbank
