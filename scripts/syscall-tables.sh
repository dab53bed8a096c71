#!/usr/bin/env bash
# Writes sandbox/seccomp/syscalls.tsv: every syscall of each architecture the
# seccomp filter is built for (x86_64, aarch64), by name, from the kernel's
# own UAPI tables (asm/unistd_64.h of x86 and arm64 in Debian's
# linux-libc-dev, which carries every architecture's headers). The package
# comes through the private apt configuration of kernels-fetch.sh; the
# system's sources are never touched.
#
#   scripts/syscall-tables.sh [VERSION]    (default: the newest in the index)
#
# The filter answers ENOSYS to every number above the highest of its
# architecture's column, so a kernel newer than this table adds no syscall
# the filter lets through. Regenerate it when a newer kernel is out, then
# give each new syscall a row of sandbox/seccomp/rules.cc or a reason why it
# needs none.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$src/sandbox/seccomp/syscalls.tsv"
spec="linux-libc-dev${1:+=$1}"
deb=$("$src/scripts/kernels-fetch.sh" --package "$spec")
x=$(mktemp -d)
trap 'rm -rf "$x"' EXIT
dpkg -x "$deb" "$x"
version=$(dpkg-deb -f "$deb" Version)
/usr/bin/python3 - "$x/usr/lib/linux/uapi" "$version" "$out" <<'PY'
import os, re, sys
root, version, out = sys.argv[1:]
arches = {"x86_64": "x86/asm/unistd_64.h", "aarch64": "arm64/asm/unistd_64.h"}
define = re.compile(r"^#define __NR_([a-z0-9_]+)\s+(\d+)\s*$")
numbers = {}
for arch, rel in arches.items():
    with open(os.path.join(root, rel)) as f:
        for line in f:
            m = define.match(line)
            if m:
                numbers.setdefault(m.group(1), {})[arch] = int(m.group(2))
    if not any(arch in n for n in numbers.values()):
        sys.exit(f"syscall-tables: no syscall in {rel}")
rows = sorted(numbers.items(), key=lambda kv: (kv[1].get("x86_64", 10**6), kv[1].get("aarch64", 10**6), kv[0]))
tmp = out + ".tmp"
with open(tmp, "w") as f:
    f.write(f"# Syscall numbers by architecture, from linux-libc-dev {version}\n")
    f.write("# (asm/unistd_64.h of x86 and arm64), written by scripts/syscall-tables.sh.\n")
    f.write("# '-': the architecture has no such syscall.\n")
    f.write("name\t" + "\t".join(arches) + "\n")
    for name, by_arch in rows:
        f.write(name + "\t" + "\t".join(str(by_arch.get(a, "-")) for a in arches) + "\n")
os.replace(tmp, out)
print(f"syscall-tables: {out}: {len(rows)} syscalls from linux-libc-dev {version}")
PY
