// steptrace OUT -- PROGRAM [ARG...]: runs PROGRAM under ptrace and
// single-steps it from its exec to its next exec (or its exit), writing to
// OUT, one per line in hex, each instruction address below 4 GiB the first
// time it runs. scripts/launch-order.sh maps them to the launcher's
// functions, in the order a launch first runs them.
//
// Only the traced thread is stepped (a clone of it is not followed), and a
// signal it receives is passed on, so the program runs as it would untraced,
// only about ten thousand times slower.
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define kAddressLimit (1ul << 32)

static int IsExecStop(int status) {
  return WIFSTOPPED(status) && (status >> 8) == (SIGTRAP | (PTRACE_EVENT_EXEC << 8));
}

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: steptrace OUT -- PROGRAM [ARG...]\n");
    return 64;
  }
  FILE* out = fopen(argv[1], "w");
  if (out == NULL) {
    perror(argv[1]);
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(126);
    raise(SIGSTOP);
    execv(argv[3], argv + 3);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
      ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) != 0 ||
      ptrace(PTRACE_CONT, pid, 0, 0) != 0 || waitpid(pid, &status, 0) != pid || !IsExecStop(status)) {
    fprintf(stderr, "steptrace: %s did not start under ptrace\n", argv[3]);
    return 1;
  }
  uint8_t* seen = calloc(kAddressLimit / 8, 1);
  if (seen == NULL) {
    perror("calloc");
    return 1;
  }
  long steps = 0;
  int signal_to_pass = 0;
  for (;;) {
    if (ptrace(PTRACE_SINGLESTEP, pid, 0, signal_to_pass) != 0) break;
    signal_to_pass = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) || IsExecStop(status)) break;
    if (WSTOPSIG(status) != SIGTRAP) {
      signal_to_pass = WSTOPSIG(status);
      continue;
    }
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, 0, &regs) != 0) break;
    ++steps;
    const unsigned long ip = regs.rip;
    if (ip < kAddressLimit && !(seen[ip / 8] & (1u << (ip % 8)))) {
      seen[ip / 8] |= 1u << (ip % 8);
      fprintf(out, "%lx\n", ip);
    }
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  fprintf(stderr, "steptrace: %ld instructions stepped\n", steps);
  return fclose(out) == 0 && steps > 0 ? 0 : 1;
}
