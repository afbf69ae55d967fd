#!/usr/bin/env bash
# Builds and runs lt's libFuzzer targets: the parsers that read untrusted input.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
#
# SECONDS (default 20) per target; BUILD_DIR (default build-fuzz) gets the
# binaries, logs/<target>.log and crashes/ (inputs that crashed, leaked or
# broke an invariant; rerun one with BUILD_DIR/fuzz_<target> FILE).
# Each target is one tests/fuzz/fuzz_<name>.c compiled with clang
# (-fsanitize=fuzzer,address,undefined) together with the few core sources
# it needs, listed below; the project itself is not built. Each runs on a
# temporary copy of tests/fuzz/corpus/<name>/, so the committed seeds never
# grow. Exit status: 0 when every target ran clean, 1 when one failed to
# build, crashed, leaked or timed out, 77 when clang or libFuzzer is missing
# (install clang and libclang-rt-dev: scripts/install-deps.sh).
# CC=clang-15 picks another clang.
set -uo pipefail

secs=${1:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${2:-$src/build-fuzz}
cc=${CC:-clang}
case $cc in *clang*) ;; *) cc=clang ;; esac # the project's CC may be gcc

# name | sources (and flags) besides tests/fuzz/fuzz_<name>.c | libraries | -max_len
targets=(
  "config_ini|core/config/config.c core/common/text.c core/common/ctx.c core/common/status.c|-linih|4096"
  "args|core/ltrun/args.c core/config/config.c core/config/devices.c core/common/text.c core/common/ctx.c core/common/status.c|-linih|4096"
  "devices|core/config/devices.c||256"
  "idx|core/data/idx.c core/data/idx_gz.c core/data/idx_cache.c core/common/ctx.c core/common/status.c|-lz|16384"
  "safetensors|core/io/safetensors.c core/common/status.c|-ljansson|8192"
  "store_server|core/dist/store_wire.c core/dist/store_table.c core/common/ctx.c core/common/status.c|-lpthread|8192"
  "store_client|core/dist/store_wire.c core/common/ctx.c core/common/status.c||4096"
  "hostlist|-I plugins/environments/slurm plugins/environments/slurm/hostlist.c||512"
)

cflags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -Wall -Wextra -I core -I sdk/include -I tests/fuzz)

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: skipped: $cc not found (install clang and libclang-rt-dev)"
  exit 77
fi
mkdir -p "$out/logs" "$out/crashes" || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/lt-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
  >"$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" >"$work/probe.log" 2>&1; then
  echo "fuzz: skipped: $cc cannot link -fsanitize=fuzzer (libFuzzer missing: install libclang-rt-dev)"
  exit 77
fi

cd "$src" || exit 1
for f in tests/fuzz/fuzz_*.c; do # a new target without a row here would never run
  n=${f#tests/fuzz/fuzz_}
  n=${n%.c}
  printf '%s\n' "${targets[@]}" | grep -q "^$n|" || { echo "fuzz: $f has no row in run.sh's targets"; exit 1; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
echo "fuzz: $cc, ${#targets[@]} targets, ${secs} s each, output in $out"
printf '%-13s %11s %8s %16s %9s  %s\n' target executions exec/s "coverage (new)" new-units crashes
for t in "${targets[@]}"; do
  IFS='|' read -r name srcs libs maxlen <<<"$t"
  bin=$out/fuzz_$name
  log=$out/logs/$name.log
  # shellcheck disable=SC2086 # srcs and libs are word lists
  if ! "$cc" "${cflags[@]}" "tests/fuzz/fuzz_$name.c" $srcs $libs -o "$bin" >"$log" 2>&1; then
    printf '%-13s BUILD FAILED (%s):\n' "$name" "$log"
    tail -n 30 "$log" | sed 's/^/    /'
    failed=1
    continue
  fi
  rm -rf "$work/corpus"
  cp -r "tests/fuzz/corpus/$name" "$work/corpus"
  "$bin" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
    -artifact_prefix="$out/crashes/$name-" "$work/corpus" >>"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  units=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -n 1)
  cov0=$(grep -m 1 -o 'INITED cov: [0-9]*' "$log" | grep -o '[0-9]*$')
  cov1=$(grep -o ' cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
  covtext=-
  [ -n "$cov0" ] && [ -n "$cov1" ] && covtext="$cov1 (+$((cov1 - cov0)))"
  if [ "$rc" -eq 0 ]; then
    printf '%-13s %11s %8s %16s %9s  %s\n' "$name" "${execs:-?}" "${rate:-?}" "$covtext" "${units:-?}" 0
    continue
  fi
  failed=1
  what=$(grep -m 1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|fuzz: invariant broken|deadly signal|ALARM: working on the last Unit' "$log")
  unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
  printf '%-13s %11s %8s %16s %9s  %s\n' "$name" "${execs:-?}" "${rate:-?}" "$covtext" "${units:-?}" "1 (exit $rc)"
  echo "    ${what:-libFuzzer exited $rc}"
  [ -n "$unit" ] && echo "    input: $unit  (rerun: $bin $unit)"
  echo "    log: $log; its end:"
  tail -n 40 "$log" | sed 's/^/    | /'
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED (see above)"
  exit 1
fi
echo "fuzz: every target ran clean"
