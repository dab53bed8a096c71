/* Every System V IPC call: message queues, semaphores and shared memory
 * live in an IPC namespace reached by key or id, never by a path Landlock
 * sees, and sandbox-exec leaves the job in the host's. The seccomp filter
 * refuses all eleven calls (EPERM), each a row of its own; here each is
 * made with an id no object has (-1) or as IPC_PRIVATE (then removed), so
 * an unfiltered call answers EINVAL or succeeds. */
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#include "probe.h"

static long made(long id, int kind) {
  if (id >= 0) {
    if (kind == 0) msgctl((int)id, IPC_RMID, NULL);
    if (kind == 1) semctl((int)id, 0, IPC_RMID);
    if (kind == 2) shmctl((int)id, IPC_RMID, NULL);
  }
  return id;
}

int main(void) {
  char buf[64];
  struct sembuf op = {0, 1, IPC_NOWAIT};
  struct timespec ts = {0, 0};
  const struct probe_call calls[] = {
      probe_call("msgget", made(syscall(SYS_msgget, IPC_PRIVATE, IPC_CREAT | 0600), 0)),
      probe_call("msgsnd", syscall(SYS_msgsnd, -1, buf, 8, IPC_NOWAIT)),
      probe_call("msgrcv", syscall(SYS_msgrcv, -1, buf, 8, 0, IPC_NOWAIT)),
      probe_call("msgctl", syscall(SYS_msgctl, -1, IPC_STAT, NULL)),
      probe_call("semget", made(syscall(SYS_semget, IPC_PRIVATE, 1, IPC_CREAT | 0600), 1)),
      probe_call("semop", syscall(SYS_semop, -1, &op, 1)),
      probe_call("semtimedop", syscall(SYS_semtimedop, -1, &op, 1, &ts)),
      probe_call("semctl", syscall(SYS_semctl, -1, 0, IPC_STAT, NULL)),
      probe_call("shmget", made(syscall(SYS_shmget, IPC_PRIVATE, 4096, IPC_CREAT | 0600), 2)),
      probe_call("shmat", syscall(SYS_shmat, -1, NULL, 0)),
      probe_call("shmctl", syscall(SYS_shmctl, -1, IPC_STAT, NULL)),
  };
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EPERM);
}
