#!/usr/bin/env bash
# Builds the egress-any archive a kernel-matrix guest row with "egress_any":
# true boots with, appended to the common initramfs (the kernel unpacks
# concatenated archives in order):
#
#   scripts/initramfs-egress-any.sh ID [OUT]
#       (default build-static/kernel-matrix/egress-any-ID.cpio.zst)
#
# Contents: what an egress-any job's network runs on, so the guest's agent
# can start it and its battery can prove the class on that kernel:
#   - the user-mode stack (this system's /usr/bin/slirp4netns) and the
#     nftables helper (oarbank-netfilter, from the host build
#     $OARBANK_HOST_BUILD, default build/, placed beside the guest's agent,
#     where the agent looks for it), each with its shared libraries at the
#     paths the dynamic loader resolves here;
#   - iproute2's ip at /usr/sbin/ip, with its libraries: the battery builds
#     its network world with `ip -batch`, which busybox's applet lacks;
#   - the row's kernel modules, from the row's own kernel package (fetched by
#     scripts/kernels-fetch.sh): the tap device (tun), nf_tables and the
#     expressions the job's ruleset uses, and veth for the battery's network
#     world, with every module they depend on, decompressed, and the
#     modules.dep that depmod writes for them;
#   - /oarbank/egress-any/modules: the names /init loads with modprobe.
# A module the kernel has built in is not copied; one that is neither built
# in nor shipped fails the build. x86-64 only: the programs are this system's.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
id="${1:-}"
[[ -n "$id" ]] || { echo "usage: scripts/initramfs-egress-any.sh ID [OUT]" >&2; exit 64; }
out="${2:-${OARBANK_STATIC_BUILD:-$src/build-static}/kernel-matrix/egress-any-$id.cpio.zst}"
cache="${OARBANK_KERNEL_CACHE:-/var/cache/oarbank-kernels}"
host_build="${OARBANK_HOST_BUILD:-$src/build}"
py="${PYTHON:-/usr/bin/python3}"
say() { printf 'initramfs-egress-any: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
for tool in cpio zstd ldd xz dpkg-deb depmod "$py"; do
  command -v "$tool" >/dev/null || PATH="$PATH:/sbin:/usr/sbin" command -v "$tool" >/dev/null ||
    die "needs $tool (apt-get install cpio zstd xz-utils kmod)"
done
export PATH="$PATH:/sbin:/usr/sbin"

# The modules the job network needs (the attestation's list,
# StackKernelModules in sandbox/plan/stack_parts.cc: tun, nf_tables and its
# netlink, reject, ct, nat) and the battery's veth pair; harness/
# test_kernel_matrix.py holds the two lists equal.
roots=(tun nfnetlink nf_tables nf_conntrack nf_nat nft_ct nft_nat nft_chain_nat nft_reject nft_reject_inet
  nf_reject_ipv4 nf_reject_ipv6 veth)

stack=/usr/bin/slirp4netns
helper="$host_build/sandbox/oarbank-netfilter"
[[ -x "$stack" ]] || die "needs $stack (apt-get install slirp4netns)"
ip=$(readlink -f /usr/sbin/ip 2>/dev/null || readlink -f /sbin/ip 2>/dev/null || true)
[[ -x "$ip" ]] && "$ip" -V 2>/dev/null | grep -q iproute2 || die "needs iproute2's ip (apt-get install iproute2)"
[[ -f "$host_build/build.ninja" ]] || cmake -S "$src" -B "$host_build" -G Ninja >&2 || die "cannot configure $host_build"
ninja -C "$host_build" oarbank-netfilter >/dev/null || die "cannot build oarbank-netfilter in $host_build"

record="$cache/kernels/$id.json"
[[ -f "$record" ]] || die "no $record: run scripts/kernels-fetch.sh $id first"
{ read -r pkg; read -r ver; read -r release; } < <("$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["package"]); print(r["version"]); print(r["release"])' "$record")
deb=$("$src/scripts/kernels-fetch.sh" --package "$pkg=$ver") || die "cannot fetch $pkg $ver"

stage=$(mktemp -d "${TMPDIR:-/tmp}/oarbank-egress-any.XXXXXX")
trap 'rm -rf "$stage"' EXIT
r="$stage/root"
x="$stage/deb"
mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/oarbank/sandbox" "$r/oarbank/egress-any" "$x"

# 1. The programs and their libraries (a file of the archive replaces the
# common archive's busybox link of the same name).
cp "$stack" "$r/usr/bin/slirp4netns"
cp "$helper" "$r/oarbank/sandbox/oarbank-netfilter"
cp "$ip" "$r/usr/sbin/ip"
strip --strip-debug "$r/oarbank/sandbox/oarbank-netfilter" 2>/dev/null || true
ldd "$stack" "$helper" "$ip" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  mkdir -p "$r$(dirname "$lib")"
  cp -L "$lib" "$r$lib"
done

# 2. The kernel modules: the package's tree, indexed by depmod, and the
# closure of the roots through modules.dep.
say "$id: modules of $(basename "$deb") ($release)"
dpkg-deb -x "$deb" "$x"
tree=""
for d in "$x/lib/modules/$release" "$x/usr/lib/modules/$release"; do [[ -d "$d" ]] && tree="$d"; done
[[ -n "$tree" ]] || die "$id: $(basename "$deb") has no modules for $release (7.x kernels ship them in another package)"
base="${tree%/lib/modules/$release}"
depmod -b "$base" "$release" 2>/dev/null || die "$id: depmod failed on $(basename "$deb")"
"$py" - "$tree" "$r/lib/modules/$release" "$r/oarbank/egress-any/modules" "${roots[@]}" <<'PY' || exit 1
import lzma, os, shutil, sys, zlib
tree, dest, names_out, roots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def key(name): return name.replace("-", "_")
deps, by_name = {}, {}
for line in open(os.path.join(tree, "modules.dep")):
    path, _, rest = line.partition(":")
    deps[path] = rest.split()
    stem = os.path.basename(path).split(".ko")[0]
    by_name[key(stem)] = path
builtin = set()
for line in open(os.path.join(tree, "modules.builtin")):
    builtin.add(key(os.path.basename(line.strip()).split(".ko")[0]))
want, loaded, missing = [], [], []
for name in roots:
    if key(name) in by_name:
        want.append(by_name[key(name)])
        loaded.append(name)
    elif key(name) not in builtin:
        missing.append(name)
if missing:
    sys.exit(f"initramfs-egress-any: neither built in nor shipped: {' '.join(missing)}")
closure, todo = set(), list(want)
while todo:
    p = todo.pop()
    if p in closure:
        continue
    closure.add(p)
    todo.extend(deps.get(p, []))
for p in sorted(closure):
    data = open(os.path.join(tree, p), "rb").read()
    plain = p
    if p.endswith(".xz"):
        data, plain = lzma.decompress(data), p[:-3]
    elif p.endswith(".gz"):
        data, plain = zlib.decompress(data, 31), p[:-3]
    elif p.endswith(".zst"):
        sys.exit(f"initramfs-egress-any: {p}: zstd-compressed modules are not handled")
    os.makedirs(os.path.dirname(os.path.join(dest, plain)), exist_ok=True)
    open(os.path.join(dest, plain), "wb").write(data)
for f in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
    if os.path.exists(os.path.join(tree, f)):
        shutil.copy(os.path.join(tree, f), os.path.join(dest, f))
open(names_out, "w").write("\n".join(loaded) + "\n")
print(f"initramfs-egress-any: {len(closure)} modules for {' '.join(loaded)}", file=sys.stderr)
PY
depmod -b "$r" "$release" || die "$id: depmod failed on the chosen modules"

mkdir -p "$(dirname "$out")"
(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | zstd -q -9 -T0 -c >"$out.tmp"
mv "$out.tmp" "$out"
say "$out: $(du -k "$out" | cut -f1) KiB ($(du -sk "$r" | cut -f1) KiB unpacked)"
echo "$out"
