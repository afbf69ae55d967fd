#!/bin/bash
# Start-up cost on the Fashion-MNIST MLP (examples/fashion_mnist/train.ini,
# batch 64 per rank), lt against PyTorch, for 1 process and for ddp with 2
# ranks on this host:
#  (a) first step: wall time from the command's start to the slowest rank's
#      first optimizer step;
#  (b) peak RSS per rank.
#
#   bench/run_startup_bench.sh [BUILD_DIR]        (default: build)
#
# lt runs the real command, one optimizer step and out:
#   ltrun --plugin-dir BUILD/plugins --config examples/fashion_mnist/train.ini
#         --devices N --strategy single_device|ddp --max-steps 1 --no-test
#         --set trainer.limit_val_batches=0 --set trainer.num_sanity_val_steps=0
#         --set checkpoint.monitor= --set trainer.enable_progress_bar=false
#         --set trainer.log_level=debug --default-root-dir TMP
# and each rank logs "first optimizer step done at <unix time>" (debug, stderr;
# "[rank N]" before it when there are several). PyTorch runs
# bench/torch_ddp.py --world N --batch 64 --first-step (the ddp bench's peer:
# --world 1 is one process with the plain model, --world 2 is
# DistributedDataParallel over gloo in 2 spawned processes, one thread each):
# each rank prints the same line right after its first opt.step() returns.
# The start time is bash's $EPOCHREALTIME read right before the command is
# forked (no date process in between); first step = max over ranks of
# (rank's time - start), so it includes exec, dynamic loading (Python's
# import torch), configuration, data loading, rendezvous and the first step.
#
# Peak RSS per rank: GNU time (/usr/bin/time -f %M, the "Maximum resident set
# size" of time -v) around the command. That is wait4's ru_maxrss of the
# command, which Linux makes the largest of the process's own and every
# reaped descendant's: ltrun with 2 ranks forks its workers as children (and
# with 1 it trains in its own process), torch_ddp.py spawns its ranks as
# children, so the figure is the largest rank (or the launcher, were it
# larger). torch_ddp.py's ranks also print their own ru_maxrss (shown in the
# per-run lines). MB here are 2^20 bytes (KiB / 1024), as run_precision_bench.
#
# lt configurations:
#   warm  the default data.cache_dir (~/.cache/lt): the IDX images inflated
#         by an earlier run on this host are read from there (the main
#         figure; the script makes one untimed run first so the cache exists);
#   cold  --set data.cache_dir=none: no cache, each rank inflates the gz
#         files into its own memory (what a first run costs, less writing
#         the cache);
#   first an empty data.cache_dir of the script's own per run: the first-ever
#         run on a host, inflating and writing the cache (FIRST=0 skips).
# The OS page cache stays warm throughout (dropping it needs root), for lt's
# binaries and data as for Python's and torch's libraries.
#
# Environment:
#   REPS=5                rounds; each round runs every configuration once
#   TORCH_PY=/usr/bin/python3       Debian's python3-torch 1.13
#   TORCH2_PY=/opt/torch2/bin/python   PyTorch 2.x; skipped if absent
#   FIRST=1               0 skips the lt "first" (empty cache) configuration
#   IDLE_WAIT=2           seconds to wait, at most, for an idle half second
#                         before each run (bench/other_load.sh); 0: don't wait
#   LT_FASHION_MNIST_DIR  data (default /usr/share/datasets/fashion-mnist)
#
# Figures: the median of REPS, min..max beside it; each run's "other" is the
# cores busy with work other than this script's during it (the machine may
# be shared). Ratios are peer / lt (above 1: lt starts sooner, or is smaller).
# The last lines ("startup ..." key=value) are for bench/run_all.sh. Nothing
# passes or fails on a figure: the exit status is non-zero only when a program
# could not run.
set -u
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run_startup_bench: no build dir ${1:-$root/build}" >&2; exit 1; }
ltrun=$build/ltrun
if [ ! -x "$ltrun" ]; then
    echo "run_startup_bench: no $ltrun; build first: cmake -S $root -B $build && cmake --build $build -j2" >&2
    exit 1
fi
if ! [ -x /usr/bin/time ] || ! /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
    echo "run_startup_bench: needs GNU time at /usr/bin/time (apt install time)" >&2
    exit 1
fi
REPS=${REPS:-5}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
TORCH2_PY=${TORCH2_PY:-/opt/torch2/bin/python}
FIRST=${FIRST:-1}
IDLE_WAIT=${IDLE_WAIT:-2}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck source=bench/other_load.sh
. "$here/other_load.sh"

log=$(mktemp /tmp/run_startup_bench.XXXXXX)
work=$(mktemp -d /tmp/run_startup_bench.d.XXXXXX)
trap 'rm -rf "$log" "$log".* "$work"' EXIT
status=0

common=(--plugin-dir "$build/plugins" --config "$root/examples/fashion_mnist/train.ini" --max-steps 1 --no-test
        --set trainer.limit_val_batches=0 --set trainer.num_sanity_val_steps=0 --set checkpoint.monitor=
        --set trainer.enable_progress_bar=false --set trainer.log_level=debug)
if [ -n "${LT_FASHION_MNIST_DIR:-}" ]; then common+=(--set "data.dir=$LT_FASHION_MNIST_DIR"); fi
lt_args() { # N: the strategy arguments for N ranks
    if [ "$1" = 1 ]; then echo "--devices 1 --strategy single_device"; else echo "--devices $1 --strategy ddp"; fi
}

# Peers: label, interpreter, version (absent ones are left out).
peers=()
declare -A peer_py peer_ver
for p in "torch1:$TORCH_PY" "torch2:$TORCH2_PY"; do
    name=${p%%:*} py=${p#*:}
    [ -x "$py" ] || { echo "run_startup_bench: no $py; $name skipped" >&2; continue; }
    if ! v=$("$py" -c "import torch, numpy; print(torch.__version__)" 2>/dev/null); then
        echo "run_startup_bench: $py cannot import torch and numpy; $name skipped" >&2
        continue
    fi
    peers+=("$name"); peer_py[$name]=$py; peer_ver[$name]=$v
done

echo "# $(date -u +%FT%TZ) $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); build $build; reps $REPS"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'); $(grep -o -w 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
# One untimed lt run: fills ~/.cache/lt if this host has none yet (so "warm"
# is warm), and shows which of lt's kernels the cpu accelerator chose.
# shellcheck disable=SC2046
(cd "$root" && "$ltrun" "${common[@]}" $(lt_args 1) --default-root-dir "$work/warmup") >"$log.out" 2>&1 ||
    { echo "run_startup_bench: the warm-up ltrun failed:" >&2; tail -5 "$log.out" >&2; status=1; }
echo "# lt isa path (cpu accelerator, debug): $(grep -m1 -o 'f32 gemm: .*' "$log.out" || echo unknown)"
for p in "${peers[@]}"; do echo "# peer $p: torch ${peer_ver[$p]} (${peer_py[$p]})"; done
echo "# peak RSS: GNU time %M around the command (largest of launcher and ranks); MB = 2^20 bytes"

# one NAME RANKS COMMAND...: one timed run; appends a key=value line to the log.
one() {
    local name=$1 ranks=$2; shift 2
    local start got first rss extra
    [ "$IDLE_WAIT" -gt 0 ] 2>/dev/null && wait_idle
    rm -rf "$work/run"; mkdir -p "$work/run"
    t_start
    start=${EPOCHREALTIME:-$(date +%s.%N)}
    /usr/bin/time -f %M -o "$log.rss" "$@" >"$log.out" 2>"$log.err"
    local rc=$?
    t_stop
    if [ "$rc" != 0 ]; then
        echo "run_startup_bench: $name ($ranks ranks) failed (exit $rc):" >&2; tail -5 "$log.err" >&2
        status=1
        return
    fi
    got=$(grep -o 'first optimizer step done at [0-9.]* (unix time)' "$log.err" | cut -d' ' -f6)
    if [ "$(echo "$got" | grep -c .)" != "$ranks" ]; then
        echo "run_startup_bench: $name: expected $ranks 'first optimizer step done' lines, got:" >&2
        grep 'first optimizer step' "$log.err" >&2; status=1
        return
    fi
    first=$(echo "$got" | awk -v s="$start" 'BEGIN { m = -1 } { d = $1 - s; if (d > m) m = d } END { printf "%.4f", m }')
    rss=$(tail -1 "$log.rss")
    case $rss in '' | *[!0-9]*) rss=0 ;; esac
    extra=$(grep -o '^\[rank [0-9]*\] first optimizer step .* maxrss_kb=[0-9]*' "$log.err" | sort |
        sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p' | awk '{ printf "%s%.1f", (NR > 1 ? "/" : ""), $1 / 1024 }')
    echo "run=$name ranks=$ranks first_s=$first rss_kb=$rss other=$other" >>"$log"
    printf '  [%s] %-9s %d rank%s  first step %7.3f s  peak RSS %6.1f MB%s  (command %.2f s; other load %s)\n' \
        "$rep" "$name" "$ranks" "$([ "$ranks" = 1 ] && echo ' ' || echo s)" "$first" \
        "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "${extra:+ (ranks say $extra)}" "$wall" "$other"
}

echo
echo "runs (MLP, batch 64 per rank; first step = slowest rank, from the command's start):"
for rep in $(seq 1 "$REPS"); do
    for n in 1 2; do
        # shellcheck disable=SC2046
        one lt_warm "$n" "$ltrun" "${common[@]}" $(lt_args "$n") --default-root-dir "$work/run"
        # shellcheck disable=SC2046
        one lt_cold "$n" "$ltrun" "${common[@]}" $(lt_args "$n") --default-root-dir "$work/run" \
            --set data.cache_dir=none
        if [ "$FIRST" = 1 ]; then
            rm -rf "$work/cache"
            # shellcheck disable=SC2046
            one lt_first "$n" "$ltrun" "${common[@]}" $(lt_args "$n") --default-root-dir "$work/run" \
                --set "data.cache_dir=$work/cache"
        fi
        for p in "${peers[@]}"; do
            one "$p" "$n" "${peer_py[$p]}" "$here/torch_ddp.py" --world "$n" --batch 64 --first-step
        done
    done
done

vers=
for p in "${peers[@]}"; do vers+="$p=${peer_ver[$p]} "; done
PEER_VERSIONS=$vers python3 - "$log" "${peers[@]}" <<'EOF'
import os
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
    r = runs.setdefault((kv["run"], int(kv["ranks"])), {"t": [], "rss": [], "other": []})
    r["t"].append(float(kv["first_s"]))
    r["rss"].append(int(kv["rss_kb"]) / 1024)
    r["other"].append(float(kv["other"]))
peers = sys.argv[2:]
ver = dict(t.split("=", 1) for t in os.environ["PEER_VERSIONS"].split())
label = {"lt_warm": "lt (warm cache)", "lt_cold": "lt (no cache)",
         "lt_first": "lt (first run, empty cache)"}
for p in peers:
    label[p] = "PyTorch %s" % ver[p]
order = ["lt_warm", "lt_cold", "lt_first"] + peers

def med(name, n, k):
    r = runs.get((name, n))
    return statistics.median(r[k]) if r and r[k] else None

print()
print("start-up, MLP batch 64/rank: median of %d (min..max)" % max((len(r["t"]) for r in runs.values()), default=0))
print("%-30s %5s  %24s  %26s  %6s" % ("", "ranks", "first step, s", "peak RSS per rank, MB", "other"))
for n in (1, 2):
    for name in order:
        r = runs.get((name, n))
        if not r:
            continue
        what = label[name] + ("" if n == 1 or not name.startswith("torch") else " DDP gloo")
        print("%-30s %5d  %7.3f (%6.3f..%6.3f)  %7.1f (%7.1f..%7.1f)  %6.2f" % (
            what, n, statistics.median(r["t"]), min(r["t"]), max(r["t"]),
            statistics.median(r["rss"]), min(r["rss"]), max(r["rss"]), statistics.median(r["other"])))
print()
print("ratios peer / lt (medians; against lt warm cache, and against lt with no cache in parentheses):")
for p in peers:
    for n in (1, 2):
        cells = []
        for k, what in (("t", "first step"), ("rss", "RSS per rank")):
            x = med(p, n, k)
            w, c = med("lt_warm", n, k), med("lt_cold", n, k)
            if x is None or not w:
                cells.append("%s n/a" % what)
            else:
                cells.append("%s %6.1fx (%5.1fx)" % (what, x / w, x / c if c else float("nan")))
        print("  %-26s %d rank%s: %s" % (label[p], n, " " if n == 1 else "s", "   ".join(cells)))
print()
for need, k, unit, what in ((0.15, "t", "s", "first step"), (50, "rss", "MB", "peak RSS per rank")):
    for n in (1, 2):
        x = med("lt_warm", n, k)
        print("target: lt %s, %d rank%s, warm cache <= %g %s: %s" % (
            what, n, "" if n == 1 else "s", need, unit,
            "n/a (not measured)" if x is None else "%.3g %s -> %s" % (x, unit, "met" if x <= need else "NOT met")))
print()
for name in order:
    for n in (1, 2):
        r = runs.get((name, n))
        if r:
            print("startup run=%s ranks=%d first_step_s=%.4f rss_mb=%.1f reps=%d version=%s" % (
                name, n, statistics.median(r["t"]), statistics.median(r["rss"]), len(r["t"]),
                ver.get(name, "lt") or "lt"))
EOF
exit $status
