#!/usr/bin/env bash
# Builds the Debian packages (dpkg-buildpackage, in a copy of this tree
# outside it), runs lintian (no errors allowed), installs them, and from the
# installed paths only (the copy is deleted first; nothing of this tree or
# of build/ is used): oarbank-agent --version, sandbox-report, a
# sandbox-exec, the oarbank-conform battery with its attestation, a `run`
# that attestation proves, and two consumer programs (tests/consumer: one
# built with find_package(oarbank_sandbox), one with pkg-config) that call
# cage::Run(Spec) and check its Result. Then purges both packages and checks
# that nothing of them is left. Needs root (apt, the battery).
#
# Whatever its end (a failed step, an interrupt), it leaves neither package
# installed and none of its working directories behind; it refuses to start
# where oarbank-sandbox or liboarbank-sandbox-dev is already installed (it
# would replace and purge the operator's). scripts/test.sh runs it after the
# pytest suites.
#
#   scripts/package-test.sh [OUT]   # OUT: where the .debs and logs go (default: a new
#                                   # /tmp directory, removed when the test passes)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
for p in oarbank-sandbox liboarbank-sandbox-dev; do
  if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
    echo "package-test: $p is already installed here; purge it first (this test would replace and purge it)" >&2
    exit 1
  fi
done
own_out=0
if [ $# -ge 1 ]; then out=$1; else out=$(mktemp -d /tmp/oarbank-package.XXXXXX); own_out=1; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in "$src"/*) echo "package-test: OUT must lie outside the source tree" >&2; exit 64 ;; esac
start=$SECONDS
step() { echo "== $* ($((SECONDS - start)) s)"; }
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }

# What this run made, undone on every exit: the tree copy, the installed
# packages (set before apt-get install, so a half-done install is purged
# too), the working directory, and OUT when it is ours and the test passed.
copy="" installed=0 work=""
cleanup() {
  local rc=$?
  cd /
  [ -n "$copy" ] && rm -rf "$copy"
  if [ "$installed" = 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq oarbank-sandbox liboarbank-sandbox-dev >/dev/null 2>&1 ||
      dpkg --purge oarbank-sandbox liboarbank-sandbox-dev >/dev/null 2>&1 || true
    if dpkg-query -W -f='${db:Status-Status}\n' oarbank-sandbox liboarbank-sandbox-dev 2>/dev/null | grep -qv '^not-installed$'; then
      echo "package-test: could not purge the packages it installed" >&2
      rc=1
    fi
  fi
  [ -n "$work" ] && rm -rf "$work"
  if [ "$rc" != 0 ]; then
    echo "package-test: logs in $out" >&2
  elif [ "$own_out" = 1 ]; then
    rm -rf "$out"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "build dependencies"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  build-essential debhelper dpkg-dev lintian fakeroot jq file >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq ./ >/dev/null

step "dpkg-buildpackage (in $out)"
version=$(dpkg-parsechangelog -S Version)
copy="$out/oarbank-sandbox-$version"
rm -rf "$copy" && mkdir -p "$copy"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$copy"
(cd "$copy" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$out/build.log" 2>&1) || { tail -50 "$out/build.log"; fail "dpkg-buildpackage"; }
rm -rf "$copy" && copy=""  # from here on only the installed package is used
debs=("$out"/oarbank-sandbox_"$version"_*.deb "$out"/liboarbank-sandbox-dev_"$version"_*.deb)
ls -l "${debs[@]}"

step "lintian"
lintian --fail-on error "$out"/oarbank-sandbox_"$version"_*.changes | tee "$out/lintian.log" || fail "lintian reports errors"

step "install"
# What exists before the packages do: the agent's state and configuration
# (/var/lib/oarbank, /etc/oarbank) may be the operator's from a clone.
before=$(ls -d /var/lib/oarbank /etc/oarbank 2>/dev/null || true)
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >/dev/null
dpkg -L oarbank-sandbox liboarbank-sandbox-dev | sort >"$out/installed-files"
# Neither the test-only launcher nor the stub library (which runs nothing)
# is ever part of a package.
! grep -q 'oarbank-agent-faulty' "$out/installed-files" || fail "the package ships oarbank-agent-faulty"
# The broker's containers start with its init (static: it runs in any image).
grep -qx '/usr/libexec/oarbank/oarbank-container-init' "$out/installed-files" ||
  fail "the package ships no oarbank-container-init"
file -L /usr/libexec/oarbank/oarbank-container-init | grep -q 'statically linked' ||
  fail "oarbank-container-init is not static"
for lib in $(grep '\.a$' "$out/installed-files"); do
  ! nm "$lib" 2>/dev/null | grep -q oarbank_sandbox_stub_build || fail "the package ships the stub library: $lib"
done

work=$(mktemp -d /tmp/oarbank-installed.XXXXXX)
cp -r "$src/tests/consumer" "$work/consumer-src"
cd "$work"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
hash -r
[ "$(command -v oarbank-agent)" = /usr/bin/oarbank-agent ] || fail "oarbank-agent is not /usr/bin/oarbank-agent"

step "oarbank-agent --version"
oarbank-agent --version | tee version.txt
grep -q "^oarbank-agent $version" version.txt || fail "--version does not say $version"
oarbank-conform --version

step "sandbox-report"
oarbank-agent sandbox-report >report.json || fail "sandbox-report"
jq -e '.supervisor' report.json >/dev/null || fail "sandbox-report has no supervisor"

step "sandbox-exec"
mkdir -p tree/bundle tree/work/tmp tree/data && chmod 755 "$work" tree tree/*
cat >tree/policy.json <<JSON
{"contract": 1, "role": "runner", "bundle": "$work/tree/bundle", "work": "$work/tree/work",
 "tmp": "$work/tree/work/tmp", "data": "$work/tree/data"}
JSON
set +e
oarbank-agent sandbox-exec tree/policy.json -- /bin/sh -c 'echo confined; cat /root/.ssh/id_ed25519 2>/dev/null && exit 9; exit 7' >exec.out
rc=$?
set -e
[ $rc = 7 ] && [ "$(cat exec.out)" = confined ] || fail "sandbox-exec: exit $rc, output $(cat exec.out)"

step "oarbank-conform (the whole battery, from the installed paths)"
oarbank-conform --out "$work/conform" --attest "$work/attestation.json" | tee conform.out || fail "oarbank-conform"
grep -q "^attestation: $work/attestation.json" conform.out || fail "oarbank-conform wrote no attestation"

step "run, proven by that attestation"
OARBANK_BATTERY_ATTESTATION="$work/attestation.json" oarbank-agent run --json tree/policy.json -- /bin/echo proven >run.json ||
  fail "run: $(cat run.json)"
jq -e --arg p "proven ($work/attestation.json)" '.container.proof == $p and .exit_code == 0' run.json >/dev/null ||
  fail "run: not proven: $(cat run.json)"

# The library's link option: a program that links it binds its symbols at
# load (no lazy binding in each job's forked processes; full RELRO).
bound_at_load() {
  readelf -d "$1" | grep -Eq '\(FLAGS\) +BIND_NOW|\(FLAGS_1\) +Flags:.* NOW' ||
    fail "$1 is bound lazily: the package's link flags lack -z now"
}

step "consumer: find_package(oarbank_sandbox)"
cmake -S consumer-src -B consumer-build -G Ninja >/dev/null
ninja -C consumer-build >/dev/null
consumer-build/consumer "$work/cage-cmake" "$work/attestation.json"
bound_at_load consumer-build/consumer

step "consumer: pkg-config oarbank-sandbox"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -o consumer-pc consumer-src/main.cc $(pkg-config --cflags --libs oarbank-sandbox)
./consumer-pc "$work/cage-pc" "$work/attestation.json"
bound_at_load consumer-pc

step "purge"
cd /
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq oarbank-sandbox liboarbank-sandbox-dev >/dev/null
installed=0
if dpkg -l oarbank-sandbox liboarbank-sandbox-dev 2>/dev/null | grep -q '^[ir]'; then fail "a package is still installed"; fi
left=()
while read -r f; do
  # Directories the packages shared with others (/usr/bin, ...) stay; their own go.
  if [ -d "$f" ] && [ -n "$(ls -A "$f" 2>/dev/null)" ] && ! [[ "$f" == */oarbank* ]]; then continue; fi
  [ -e "$f" ] && left+=("$f")
done <"$out/installed-files"
[ ${#left[@]} = 0 ] || fail "left after purge: ${left[*]}"
for d in /usr/libexec/oarbank /usr/share/oarbank /usr/include/oarbank /usr/share/doc/oarbank-sandbox \
         /usr/share/doc/liboarbank-sandbox-dev; do
  [ -e "$d" ] && fail "$d left after purge"
done
after=$(ls -d /var/lib/oarbank /etc/oarbank 2>/dev/null || true)
[ "$before" = "$after" ] || fail "the packages left state behind: $after (before: $before)"
step "package-test: ok"
