// bench/interleave: launch times of several commands measured in turns, so
// that the machine's drift (on a small VM, 20-50% from one minute to the
// next) falls on every command alike. hyperfine times each command in a
// block of its own; on this VM the medians of one block and the next differ
// by more than the 0.3 ms a launcher's goal is stated in.
//
//   interleave ROUNDS NAME COMMAND [NAME COMMAND]...
//
// COMMAND is split on spaces (no quoting: the benchmarks' paths have none).
// Each round runs every command once, fork, exec and wait, its output to
// /dev/null, starting with a different command each round. A command that
// does not exit 0 is an error (exit 1): a refused launch is not a launch.
// Prints one line per command: NAME, then the median and the fastest
// launch in ms.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

enum { kMaxCommands = 16, kMaxArgs = 64, kMaxRounds = 100000 };

struct Command {
  const char* name;
  char* argv[kMaxArgs + 1];
  double* times;
};

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int Usage(void) {
  fprintf(stderr, "usage: interleave ROUNDS NAME COMMAND [NAME COMMAND]... (at most %d commands of %d words)\n",
          kMaxCommands, kMaxArgs);
  return 64;
}

static int Split(char* line, char** argv) {
  int n = 0;
  for (char* word = strtok(line, " "); word != NULL; word = strtok(NULL, " ")) {
    if (n == kMaxArgs) return -1;
    argv[n++] = word;
  }
  argv[n] = NULL;
  return n;
}

static int Less(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  char* end = NULL;
  const long rounds = argc > 1 ? strtol(argv[1], &end, 10) : 0;
  const int count = (argc - 2) / 2;
  if (argc < 4 || (argc - 2) % 2 != 0 || *end != '\0' || rounds < 1 || rounds > kMaxRounds || count > kMaxCommands)
    return Usage();
  struct Command commands[kMaxCommands];
  for (int c = 0; c < count; c++) {
    commands[c].name = argv[2 + 2 * c];
    if (Split(argv[3 + 2 * c], commands[c].argv) < 1) return Usage();
    commands[c].times = calloc((size_t)rounds, sizeof(double));
    if (commands[c].times == NULL) return 1;
  }
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  for (long r = 0; r < rounds; r++) {
    for (int i = 0; i < count; i++) {
      struct Command* c = &commands[(r + i) % count];
      const double start = Now();
      pid_t pid;
      int status = 0;
      const int err = posix_spawn(&pid, c->argv[0], &quiet, NULL, c->argv, environ);
      if (err != 0) {
        fprintf(stderr, "interleave: %s: %s\n", c->argv[0], strerror(err));
        return 1;
      }
      while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 1;
      c->times[r] = Now() - start;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "interleave: %s did not exit 0 (status %d)\n", c->name, status);
        return 1;
      }
    }
  }
  for (int c = 0; c < count; c++) {
    qsort(commands[c].times, (size_t)rounds, sizeof(double), Less);
    printf("%s %.3f %.3f\n", commands[c].name, commands[c].times[rounds / 2], commands[c].times[0]);
  }
  return 0;
}
