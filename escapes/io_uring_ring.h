/* A minimal io_uring for the io_uring probes (raw syscalls and
 * <linux/io_uring.h>, no liburing): one submission, waited for. A refused
 * io_uring_setup or io_uring_enter ends the probe as blocked. Include after
 * probe.h. */
#ifndef OARBANK_IO_URING_RING_H
#define OARBANK_IO_URING_RING_H

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>

struct ring {
  int fd;
  unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
  struct io_uring_sqe *sqes;
  struct io_uring_cqe *cqes;
};

static int io_uring_disabled(void) {
  FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
  int v = 0;
  if (f != NULL) {
    if (fscanf(f, "%d", &v) != 1) v = 0;
    fclose(f);
  }
  return v;
}

/* Sets the ring up or ends the probe: refused setup is the block. */
static void ring_setup(struct ring *r) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  long fd = syscall(SYS_io_uring_setup, 4, &p);
  if (fd < 0) {
    int err = errno;
    if (err == EPERM && io_uring_disabled() == 2)
      unsupported("io_uring_setup: EPERM with kernel.io_uring_disabled=2 (no rings on this host)");
    blocked(err, "io_uring_setup refused");
  }
  r->fd = (int)fd;
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
  if (single && cq_len > sq_len) sq_len = cq_len;
  char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
  if (sq == MAP_FAILED) probe_error("mmap SQ ring: %s", probe_errno_name(errno));
  char *cq = single ? sq : mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
  if (cq == MAP_FAILED) probe_error("mmap CQ ring: %s", probe_errno_name(errno));
  r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                 r->fd, IORING_OFF_SQES);
  if (r->sqes == MAP_FAILED) probe_error("mmap SQEs: %s", probe_errno_name(errno));
  r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
  r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
  r->sq_array = (unsigned *)(sq + p.sq_off.array);
  r->cq_head = (unsigned *)(cq + p.cq_off.head);
  r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
  r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
  r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* Submits *sqe, waits for its completion, returns cqe->res (-errno on
 * failure). io_uring_enter refused is the block too. */
static int ring_run(struct ring *r, const struct io_uring_sqe *sqe) {
  unsigned tail = *r->sq_tail;
  unsigned idx = tail & *r->sq_mask;
  r->sqes[idx] = *sqe;
  r->sq_array[idx] = idx;
  __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
  long n = syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
  if (n < 0) blocked(errno, "io_uring_enter refused");
  unsigned head = *r->cq_head;
  if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) probe_error("io_uring_enter returned no completion");
  int res = r->cqes[head & *r->cq_mask].res;
  __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
  return res;
}

#endif
