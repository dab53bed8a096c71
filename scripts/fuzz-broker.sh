#!/usr/bin/env bash
# Fuzzes the container broker's request parser (sandbox/broker/protocol_fuzz.cc)
# for a bounded time.
#
#   scripts/fuzz-broker.sh [SECONDS]     (default 60)
#
# Builds in build-fuzz/ (scripts/fuzz-common.sh)
# broker_protocol_fuzz, lays out the directories the parser resolves mounts
# in (work/, data/, a symlink work/escape -> /), seeds a corpus of valid and
# refused requests and runs libFuzzer. Exits non-zero if the fuzzer finds a
# crash, a sanitizer report, a leak, a timeout or an out-of-memory; the input
# is kept in build-fuzz/artifacts-broker/.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/fuzz-common.sh"
fuzz_setup broker broker_protocol_fuzz "$@"

scratch="$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/oarbank-fuzz-broker.XXXXXX")")"
trap 'rm -rf "$scratch"' EXIT
root="$scratch/root"
mkdir -p "$root/work/out/deep" "$root/data/cache"
printf 'x' >"$root/work/input.txt"
ln -s / "$root/work/escape"
export OARBANK_FUZZ_BROKER_ROOT="$root"

case "$(uname -m)" in
  x86_64) platform=linux/amd64 ;;
  aarch64) platform=linux/arm64 ;;
  *) platform="linux/$(uname -m)" ;;
esac
ref="localhost/fuzz@sha256:$(printf 'a%.0s' $(seq 64))"
corpus="$scratch/corpus"
mkdir -p "$corpus"
n=0
seed() { n=$((n + 1)); printf '%s' "$1" >"$corpus/seed-$n.json"; }
seed '{"op":"status"}'
seed "{\"op\":\"container.pull\",\"image\":\"$ref\",\"platform\":\"$platform\"}"
seed "{\"op\":\"container.run\",\"image\":\"$ref\",\"platform\":\"$platform\",\"args\":[\"sh\",\"-c\",\"x\"],\"timeout_s\":10}"
seed "{\"op\":\"container.run\",\"image\":\"$ref\",\"platform\":\"$platform\",\"args\":[],\"timeout_s\":5,\"mounts\":[{\"src\":\"out/deep\",\"dst\":\"/o\",\"ro\":true},{\"src\":\"data:cache\",\"dst\":\"/c\"}],\"env\":{\"A\":\"b\"},\"workdir\":\"/o\",\"entrypoint\":[\"/bin/sh\"],\"cpus\":1,\"mem_gb\":0.5,\"network\":\"none\"}"
seed "{\"op\":\"container.run\",\"image\":\"$ref\",\"platform\":\"$platform\",\"timeout_s\":5,\"mounts\":[{\"src\":\"escape/etc\",\"dst\":\"/e\"}]}"
seed "{\"op\":\"container.run\",\"image\":\"$ref\",\"platform\":\"$platform\",\"timeout_s\":5,\"mounts\":[{\"src\":\"../x\",\"dst\":\"/e\"}],\"network\":\"egress\"}"

dict="$scratch/broker.dict"
{
  for word in op container.run container.pull status image platform args entrypoint mounts src dst ro env \
              workdir network timeout_s cpus mem_gb none egress host data: out/deep data:cache escape input.txt \
              .. . "$platform" "$ref" linux/s390x; do
    printf '"\\"%s\\""\n' "$word"
  done
  printf '"%s"\n' '/' '..' 'true' 'false' 'null' '1e308' '-1' '\\u0000' '@sha256:'
} >"$dict"

fuzz_run "$corpus" "$dict" 70000
