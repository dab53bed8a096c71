// `run --pty` on the caller's terminal: raw mode while the job runs, so
// every key (^C, ^Z and ^D included) reaches the job's own terminal, whose
// line discipline acts on it. The caller's settings come back on every exit
// this process can see: the destructor (a normal end, an exception), and
// SIGTERM, SIGHUP, SIGINT and SIGQUIT, whose handlers restore the terminal
// and then die of the signal as before. SIGKILL cannot be caught: after
// one, `stty sane` restores the terminal.
#pragma once

#include <signal.h>
#include <termios.h>

namespace oarbank {

class RawTerminal {
 public:
  // Nothing happens when fd is not a terminal.
  explicit RawTerminal(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool active() const { return active_; }

 private:
  bool active_ = false;
  struct sigaction old_[4]{};
};

}  // namespace oarbank
