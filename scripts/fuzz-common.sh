# Sourced by scripts/fuzz-*.sh: what every bounded fuzz run shares.
#
#   fuzz_setup NAME TARGET [SECONDS]   checks SECONDS (default 60), configures
#       build-fuzz/ (OARBANK_FUZZ_BUILD overrides it) with clang and
#       -DOARBANK_FUZZ=ON, builds TARGET; sets $seconds, $src, $build,
#       $artifacts (build-fuzz/artifacts-NAME). Every target shares the one
#       instrumented build, so CI compiles the library once.
#   fuzz_run CORPUS DICT MAX_LEN       runs libFuzzer on TARGET for $seconds;
#       exits non-zero on a crash, a sanitizer report, a leak, a timeout or
#       an out-of-memory, keeping the input in $artifacts.

fuzz_setup() {
  fuzz_name="$1" fuzz_target="$2"
  seconds="${3:-60}"
  if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
    echo "usage: $0 [SECONDS]  (a positive number of seconds, default 60)" >&2
    exit 64
  fi
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  build="${OARBANK_FUZZ_BUILD:-$src/build-fuzz}"
  artifacts="$build/artifacts-$fuzz_name"
  # Instrument every object, not only the fuzz target (fuzzer-no-link): the
  # parsers live in the oarbank_sandbox library, and without it libFuzzer
  # would get no coverage from the code it is meant to explore.
  local sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  # Line tables are all a sanitizer's report needs for file:line in its
  # stack traces; full debug information only adds compile time.
  local optimize="-O2 -gline-tables-only -DNDEBUG"
  # One script at a time configures and builds (scripts/test.sh runs two
  # fuzzers at once); the runs themselves share nothing.
  mkdir -p "$build"
  local lock
  exec {lock}>"$build/.build-lock"
  flock "$lock"
  CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" \
    -DOARBANK_FUZZ=ON -DOARBANK_TESTS=OFF \
    -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
  ninja -C "$build" "$fuzz_target"
  exec {lock}>&-
}

fuzz_run() {
  local corpus="$1" dict="$2" max_len="$3" status=0
  mkdir -p "$artifacts"
  echo "fuzz-$fuzz_name: $(ls "$corpus" | wc -l) seeds, ${seconds}s"
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    "$build/sandbox/$fuzz_target" "$corpus" \
    -dict="$dict" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len="$max_len" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?
  if (( status != 0 )); then
    echo "fuzz-$fuzz_name: FAILED (exit $status); inputs in $artifacts:" >&2
    ls -t "$artifacts" | head -5 >&2
    exit "$status"
  fi
  echo "fuzz-$fuzz_name: no crash in ${seconds}s"
}
