#!/usr/bin/env bash
# Fetches the kernel-matrix kernels (fixtures/kernels.json) into a cache
# outside the repository, through an apt configuration of its own.
#
#   scripts/kernels-fetch.sh [ID...]     (default: every guest; IDs like 5.10 6.1 7.3)
#   scripts/kernels-fetch.sh --busybox   (busybox-static, when the host has none)
#   scripts/kernels-fetch.sh --package NAME[:ARCH][=VERSION]
#                                        (any package of the private index, amd64
#                                        unless ARCH (arm64), the newest unless
#                                        VERSION: prints its .deb)
#
# The cache is $OARBANK_KERNEL_CACHE (default /var/cache/oarbank-kernels):
#   apt/                 sources.list, lists, archives: the private apt state
#   debs/                the downloaded packages, by name and version
#   kernels/ID/VERSION/  vmlinuz (as shipped), vmlinux (ELF, for a PVH boot, when
#                        it can be extracted), config
#   kernels/ID.json      what the matrix boots for ID: package, version, suite,
#                        whether pinned or resolved, sha256
# A kernel already in the cache at its pinned version needs no network. The
# system's apt sources are never touched: the mirror URIs and the keyring are
# read from /etc/apt/sources.list.d/debian.sources (override with
# OARBANK_APT_MIRROR, OARBANK_APT_SECURITY_MIRROR, OARBANK_APT_KEYRING), and
# every apt call gets its own SourceList, SourceParts, Lists and Cache by -o.
# OARBANK_APT_UPDATE=1 forces a fresh index (it is otherwise kept a day).
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernels_json="${OARBANK_KERNELS_JSON:-$src/fixtures/kernels.json}"
cache="${OARBANK_KERNEL_CACHE:-/var/cache/oarbank-kernels}"
aptdir="$cache/apt"
say() { printf 'kernels-fetch: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

py="${PYTHON:-/usr/bin/python3}"
for tool in apt-get apt-cache dpkg dpkg-deb "$py" flock; do
  command -v "$tool" >/dev/null || die "needs $tool"
done
mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial" "$cache/debs" "$cache/kernels"
exec 9>"$cache/.lock"
flock 9

# ---- the private apt configuration ------------------------------------
sources="${OARBANK_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
deb822_field() {  # FIELD [SUITE-PATTERN]: the first stanza's FIELD whose Suites match
  "$py" - "$sources" "$1" "${2:-}" <<'PY'
import re, sys
path, field, suite_re = sys.argv[1:]
try:
    text = open(path).read()
except OSError:
    sys.exit(0)
for stanza in re.split(r"\n\s*\n", text):
    fields = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line or line[0].isspace():
            continue
        k, v = line.split(":", 1)
        fields[k.strip()] = v.strip()
    if not fields.get("URIs"):
        continue
    if suite_re and not re.search(suite_re, fields.get("Suites", "")):
        continue
    if not suite_re and "-security" in fields.get("Suites", ""):
        continue
    print(fields.get(field, "").split()[0] if fields.get(field) else "")
    break
PY
}
mirror="${OARBANK_APT_MIRROR:-$(deb822_field URIs)}"
security="${OARBANK_APT_SECURITY_MIRROR:-$(deb822_field URIs -security)}"
keyring="${OARBANK_APT_KEYRING:-$(deb822_field Signed-By)}"
mirror="${mirror:-http://deb.debian.org/debian}"
security="${security:-${mirror%/debian}/debian-security}"
keyring="${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}"
[[ -r "$keyring" ]] || die "keyring $keyring is not readable"

suites=$("$py" -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["apt_suites"]))' "$kernels_json")
{
  echo "# architectures: amd64 arm64"
  for s in $suites; do
    case "$s" in
      *-security) echo "deb [signed-by=$keyring] $security $s main" ;;
      *) echo "deb [signed-by=$keyring] $mirror $s main" ;;
    esac
  done
} >"$aptdir/sources.list.new"
if ! cmp -s "$aptdir/sources.list.new" "$aptdir/sources.list" 2>/dev/null; then
  mv "$aptdir/sources.list.new" "$aptdir/sources.list"
  rm -f "$aptdir/updated"
else
  rm -f "$aptdir/sources.list.new"
fi
apt_opts=(
  -o "Dir::Etc::SourceList=$aptdir/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::Etc::Preferences=/dev/null"
  -o "Dir::Etc::PreferencesParts=/dev/null"
  -o "Dir::State::Lists=$aptdir/lists"
  -o "Dir::State::status=/dev/null"
  -o "Dir::Cache=$aptdir"
  -o "Dir::Cache::archives=$aptdir/archives"
  -o "APT::Architecture=amd64"
  -o "APT::Architectures::=amd64"
  -o "APT::Architectures::=arm64"
  -o "Acquire::Languages=none"
  -o "Acquire::Retries=3"
)
updated=0
apt_update() {
  (( updated )) && return 0
  if [[ "${OARBANK_APT_UPDATE:-0}" != 1 && -n "$(find "$aptdir/updated" -mmin -1440 2>/dev/null)" ]]; then
    updated=1
    return 0
  fi
  say "apt-get update (private sources: $suites)"
  apt-get "${apt_opts[@]}" -q update 2>&1 | sed -u 's/^/  apt: /' >&2 || die "apt-get update failed"
  touch "$aptdir/updated"
  updated=1
}

# Versions of PACKAGE the index has, "VERSION SUITE" per line, newest first.
madison() {
  apt-cache "${apt_opts[@]}" madison "$1" 2>/dev/null |
    awk -F'|' '{gsub(/ /,"",$2); split($3,a," "); s=a[2]; sub(/\/.*/,"",s); print $2, s}' |
    "$py" -c '
import subprocess, sys, functools
rows = [l.split() for l in sys.stdin if l.strip()]
def cmp(a, b):
    if a[0] == b[0]: return 0
    return -1 if subprocess.call(["dpkg", "--compare-versions", a[0], "lt", b[0]]) == 0 else 1
for r in sorted(rows, key=functools.cmp_to_key(cmp), reverse=True): print(*r)'
}

# Downloads PACKAGE[:ARCH]=VERSION into debs/ with a progress line; prints the path.
download() {
  local pkg="$1" ver="$2" size_mb file arch=amd64
  [[ "$pkg" == *:* ]] && arch="${pkg#*:}"
  file="$cache/debs/${pkg%%:*}_${ver//:/%3a}_$arch.deb"
  if [[ -s "$file" ]] && dpkg-deb --info "$file" >/dev/null 2>&1; then
    echo "$file"
    return 0
  fi
  size_mb=$(apt-cache "${apt_opts[@]}" show "$pkg=$ver" 2>/dev/null | awk '/^Size:/{printf "%.1f", $2/1048576; exit}')
  say "downloading $pkg $ver (${size_mb:-?} MB)"
  local tmp
  tmp=$(mktemp -d "$cache/debs/.dl.XXXXXX")
  (cd "$tmp" && apt-get "${apt_opts[@]}" -q download "$pkg=$ver" >"$tmp/log" 2>&1) &
  local pid=$! start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    local got
    got=$(du -sm "$tmp" 2>/dev/null | cut -f1)
    printf 'kernels-fetch:   %s: %s of %s MB, %ss\n' "$pkg" "${got:-0}" "${size_mb:-?}" "$((SECONDS - start))" >&2
  done
  if ! wait "$pid"; then
    sed 's/^/  apt: /' "$tmp/log" >&2
    rm -rf "$tmp"
    die "download of $pkg=$ver failed"
  fi
  mv "$tmp"/*.deb "$file"
  rm -rf "$tmp"
  echo "$file"
}

if [[ "${1:-}" == --busybox ]]; then
  out="$cache/busybox"
  for b in "$out/bin/busybox" "$out/usr/bin/busybox"; do
    if [[ -x "$b" ]]; then echo "$b"; exit 0; fi
  done
  apt_update
  ver=$(madison busybox-static | awk 'NR==1{print $1}')
  [[ -n "$ver" ]] || die "busybox-static is not in the private index"
  deb=$(download busybox-static "$ver")
  rm -rf "$out" && dpkg -x "$deb" "$out"
  for b in "$out/bin/busybox" "$out/usr/bin/busybox"; do  # merged /usr from trixie on
    if [[ -x "$b" ]]; then echo "$b"; exit 0; fi
  done
  die "no busybox in $deb"
fi

if [[ "${1:-}" == --package ]]; then
  [[ -n "${2:-}" ]] || die "--package needs NAME[:ARCH][=VERSION]"
  pkg="${2%%=*}"
  ver=""
  [[ "$2" == *=* ]] && ver="${2#*=}"
  apt_update
  [[ -n "$ver" ]] || ver=$(madison "$pkg" | awk 'NR==1{print $1}')
  [[ -n "$ver" ]] || die "$pkg is not in the private index"
  download "$pkg" "$ver"
  exit 0
fi

# ---- one row of kernels.json ------------------------------------------
row() {  # ID: package, version, suite and resolve pattern, one per line
  "$py" -c '
import json, sys
rows = {g["id"]: g for g in json.load(open(sys.argv[1]))["guests"]}
if sys.argv[2] not in rows: sys.exit("no guest " + sys.argv[2] + " in " + sys.argv[1])
g = rows[sys.argv[2]]
print(g["package"], g["version"], g["suite"], g["resolve"], g.get("arch", "amd64"), sep="\n")' "$kernels_json" "$1"
}

# The compressed kernel inside a bzImage, decompressed to an ELF vmlinux,
# which QEMU boots through PVH without decompressing in the guest (about a
# second less per boot under TCG on zstd kernels).
extract_vmlinux() {
  "$py" - "$1" "$2" <<'PY'
import subprocess, sys
data = open(sys.argv[1], "rb").read()
magics = [(b"\x28\xb5\x2f\xfd", ["zstd", "-dcq"]), (b"\x02\x21\x4c\x18", ["lz4", "-dcq"]),
          (b"\xfd7zXZ\x00", ["xz", "-dcq"]), (b"\x1f\x8b\x08", ["gzip", "-dcq"])]
for magic, cmd in magics:
    at = data.find(magic)
    while at >= 0:
        try:
            out = subprocess.run(cmd, input=data[at:], capture_output=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = b""
        if out[:4] == b"\x7fELF":
            open(sys.argv[2], "wb").write(out)
            sys.exit(0)
        at = data.find(magic, at + 1)
sys.exit(1)
PY
}

fetch_one() {
  local id="$1" pkg ver suite pattern arch source dir sfx=""
  { read -r pkg; read -r ver; read -r suite; read -r pattern; read -r arch; } < <(row "$id")
  [[ "$arch" == amd64 ]] || sfx=":$arch"  # apt's name for a foreign architecture's package
  [[ -n "$pattern" ]] || die "$id: not a guest in $kernels_json"
  source=pinned
  dir="$cache/kernels/$id/$ver"
  if [[ ! -s "$dir/vmlinuz" ]]; then
    apt_update
    if ! madison "$pkg$sfx" | awk -v v="$ver" '$1 == v { found = 1 } END { exit !found }'; then
      say "$id: $pkg $ver is no longer served; resolving /$pattern/ in $suite"
      local prefix best="" best_ver="" name v s
      prefix=$(printf '%s' "$pattern" | sed -E 's/^\^//; s/[\\[(].*$//')
      while read -r name; do
        [[ "$name" =~ $pattern ]] || continue
        while read -r v s; do
          [[ "$s" == "$suite" ]] || continue
          if [[ -z "$best" ]] || dpkg --compare-versions "$v" gt "$best_ver"; then best="$name"; best_ver="$v"; fi
          break
        done < <(madison "$name$sfx")
      done < <(apt-cache "${apt_opts[@]}" pkgnames "$prefix" | sort)
      [[ -n "$best" ]] || die "$id: nothing matches /$pattern/ in $suite"
      pkg="$best"
      ver="$best_ver"
      source=resolved
      dir="$cache/kernels/$id/$ver"
      say "$id: using $pkg $ver"
    fi
  fi
  if [[ ! -s "$dir/vmlinuz" ]]; then
    local deb x
    deb=$(download "$pkg$sfx" "$ver")
    x=$(mktemp -d "$cache/kernels/.x.XXXXXX")
    say "$id: dpkg -x $(basename "$deb")"
    dpkg -x "$deb" "$x"
    local vmlinuz
    vmlinuz=$( (find "$x/boot" "$x/usr/lib/modules" -maxdepth 2 \( -name 'vmlinuz-*' -o -name vmlinuz \) -type f 2>/dev/null || true) | head -1)
    [[ -n "$vmlinuz" ]] || { rm -rf "$x"; die "$id: no vmlinuz in $deb"; }
    mkdir -p "$dir.tmp"
    cp "$vmlinuz" "$dir.tmp/vmlinuz"
    local config
    config=$( (find "$x/boot" "$x/usr/lib/modules" -maxdepth 2 \( -name 'config-*' -o -name config \) -type f 2>/dev/null || true) | head -1)
    [[ -n "$config" ]] && cp "$config" "$dir.tmp/config"
    case "$vmlinuz" in
      */vmlinuz-*) basename "$vmlinuz" | sed 's/^vmlinuz-//' >"$dir.tmp/release" ;;
      *) basename "$(dirname "$vmlinuz")" >"$dir.tmp/release" ;;
    esac
    rm -rf "$x"
    if extract_vmlinux "$dir.tmp/vmlinuz" "$dir.tmp/vmlinux"; then :; else rm -f "$dir.tmp/vmlinux"; fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  else
    say "$id: cached ($pkg $ver)"
  fi
  "$py" - "$cache/kernels/$id.json" "$id" "$pkg" "$ver" "$suite" "$source" "$dir" <<'PY'
import hashlib, json, os, sys
out, id_, pkg, ver, suite, source, d = sys.argv[1:]
vmlinuz = os.path.join(d, "vmlinuz")
vmlinux = os.path.join(d, "vmlinux")
rec = {"id": id_, "package": pkg, "version": ver, "suite": suite, "source": source,
       "release": open(os.path.join(d, "release")).read().strip(),
       "vmlinuz": vmlinuz, "vmlinux": vmlinux if os.path.exists(vmlinux) else None,
       "sha256": hashlib.sha256(open(vmlinuz, "rb").read()).hexdigest()}
json.dump(rec, open(out + ".tmp", "w"), indent=2)
os.replace(out + ".tmp", out)
PY
  printf '%s\t%s\t%s\t%s\n' "$id" "$pkg" "$ver" "$source"
}

ids=("$@")
if (( ${#ids[@]} == 0 )); then
  mapfile -t ids < <("$py" -c 'import json,sys; [print(g["id"]) for g in json.load(open(sys.argv[1]))["guests"]]' "$kernels_json")
fi
for id in "${ids[@]}"; do fetch_one "$id"; done
