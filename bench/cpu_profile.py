"""Where a launch's CPU time goes, for bench/cpu_profile.sh: reads two
`perf script -F ip,sym` dumps of call-chain samples (one launch command and
its floor, each launched LAUNCHES times), puts each sample in one bucket and
prints the CPU time per launch of each bucket for both, largest difference
first.

A sample's bucket is the first of these found from its innermost frame out:
a page fault ("page faults"), the kernel compiling a seccomp program
("seccomp filter load": its conversion, JIT and action cache, which the
unwinder often reaches without the system call's frame), a system call (by
its name), the return of a new process from fork; else "user mode" when
the sample is in user space, "scheduling" when the kernel was switching
tasks, "system call entry and exit" when it was in that path, "other
kernel" otherwise.

Usage: cpu_profile.py LAUNCHES PERIOD_MS NAME DUMP FLOOR_NAME FLOOR_DUMP
"""
import collections
import sys

KERNEL = 0xFFFF000000000000
# do_seccomp included: the kernel fills the new filter's action cache (the
# program run for every syscall number) with interrupts off, so those
# samples land where it turns them back on.
SECCOMP_LOAD = {"bpf_prepare_filter", "bpf_convert_filter", "bpf_int_jit_compile", "do_jit",
                "seccomp_set_mode_filter", "seccomp_prepare_filter", "seccomp_attach_filter", "do_seccomp"}
SYSCALL_PATH = {"do_syscall_64", "x64_sys_call", "entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe",
                "syscall_exit_to_user_mode"}
SYSCALL_PREFIXES = ("__x64_sys_", "__do_sys_", "__se_sys_")


def bucket(frames):
    for _, sym in frames:
        if sym in ("exc_page_fault", "do_user_addr_fault"):
            return "page faults"
        if sym in SECCOMP_LOAD:
            return "seccomp filter load"
        for prefix in SYSCALL_PREFIXES:
            if sym.startswith(prefix):
                return sym[len(prefix):]
        if sym.startswith("ret_from_fork"):
            return "return from fork"
    if not frames or frames[0][0] < KERNEL:
        return "user mode"
    if any(sym == "__schedule" for _, sym in frames):
        return "scheduling"
    return "system call entry and exit" if frames[0][1] in SYSCALL_PATH else "other kernel"


def samples(path):
    frames = []
    for line in open(path, errors="replace"):
        fields = line.split(None, 1)
        if not fields:
            if frames:
                yield frames
            frames = []
            continue
        try:
            frames.append((int(fields[0], 16), fields[1].strip() if len(fields) > 1 else "?"))
        except ValueError:
            continue
    if frames:
        yield frames


def per_launch(path, launches, period_ms):
    counts = collections.Counter(bucket(f) for f in samples(path))
    return {k: v * period_ms / launches for k, v in counts.items()}


def main():
    launches, period_ms = int(sys.argv[1]), float(sys.argv[2])
    name, floor_name = sys.argv[3], sys.argv[5]
    a, b = per_launch(sys.argv[4], launches, period_ms), per_launch(sys.argv[6], launches, period_ms)
    if not a or not b:
        sys.exit("cpu_profile: a dump has no samples (did perf record the command?)")
    print(f"CPU time per launch, ms ({launches} launches each, one sample per {period_ms * 1000:.0f} us of CPU)")
    print(f"{'':28} {name:>14} {floor_name:>14} {'difference':>11}")
    print(f"{'all':28} {sum(a.values()):14.3f} {sum(b.values()):14.3f} {sum(a.values()) - sum(b.values()):+11.3f}")
    rows = sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) - b.get(k, 0)))
    shown = [k for k in rows if abs(a.get(k, 0) - b.get(k, 0)) >= 0.005]
    for k in shown:
        print(f"{k:28} {a.get(k, 0):14.3f} {b.get(k, 0):14.3f} {a.get(k, 0) - b.get(k, 0):+11.3f}")
    rest = [k for k in rows if k not in shown]
    if rest:
        ra, rb = sum(a.get(k, 0) for k in rest), sum(b.get(k, 0) for k in rest)
        print(f"{f'{len(rest)} more, each < 5 us apart':28} {ra:14.3f} {rb:14.3f} {ra - rb:+11.3f}")


if __name__ == "__main__":
    main()
