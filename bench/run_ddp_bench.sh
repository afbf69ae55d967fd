#!/bin/bash
# lt's distributed path on this machine, in one run:
#  1. allreduce bus bandwidth, 2 ranks on loopback, lt's gloo backend through
#     the backend ABI beside gloo::allreduce called directly (bench/allreduce_bench);
#  2. Fashion-MNIST MLP 784-512-512-10 training throughput (samples/s, total
#     over ranks) for batch per rank 64 and 512: lt 1 rank (single_device)
#     on one core (accelerator.num_threads=1, as each ddp rank runs) and on
#     every core (OpenBLAS's default threads), two one-core processes at
#     once, each bound to its own core ("lt 2 alone": two ranks that never
#     communicate, the most 2 ranks can reach on this machine's shared cache,
#     memory and clock), lt 2 ranks ddp as it runs by
#     default and with overlap forced on and off, over the default backend
#     (process_group_backend = auto: shm, all ranks being on this host), with
#     the gradients in the ranks' own memory instead of shm's group memory
#     ("own-mem": strategy.place_grads=false, copied through shm's slots) and
#     with overlap over gloo, PyTorch 1 rank and PyTorch DDP
#     2 ranks over gloo (bench/torch_ddp.py, one thread per rank), with the
#     ratios lt ddp / torch ddp and lt ddp / lt single and the issue's targets.
#
#   bench/run_ddp_bench.sh [BUILD_DIR]        (default: build)
#
# lt runs through the real command (ltrun --strategy ddp --devices 2 ...) and
# its "epoch 0 done: ... N samples/s" line: one epoch of 55000 samples, the
# whole training loop. torch times the same number of samples after 20 warm-up
# steps (its start-up of 1.5-2.5 s is not counted; lt's first steps are).
#
# Environment:
#   REPS=3                rounds; each runs every lt configuration and both torch runs
#   BATCHES="64 512"      batch sizes per rank
#   LT_SET=""             extra ltrun arguments for the ddp runs (e.g. "--set strategy.compute_nice=0")
#   ALLREDUCE=1           0 skips the allreduce part
#   ALLREDUCE_ARGS=""     extra allreduce_bench arguments (e.g. "--rounds 5")
#   TORCH_PY=/usr/bin/python3   Debian's python3-torch 1.13
#   LT_FASHION_MNIST_DIR  data (default /usr/share/datasets/fashion-mnist)
#
# Where the second core goes at batch 64 (measured 2026-11-24, AMD EPYC, 2
# cores, default backend = shm, bench/thread_stats.py over one epoch of 430
# steps per rank; ltrun binds each rank to one core, so a rank's threads
# share it). Before group memory, per rank and step: the training thread
# 3.4-3.9 ms of CPU (one process alone: 2.9 ms), the shm worker 0.73-0.76
# ms copying the 2.7 MB of gradients into the segment, reducing half and
# copying both halves out, the data loader 0.16-0.2 ms: 1.41x one process.
# With the gradients in shm's group memory (strategy.place_grads, the
# default), the worker reduces in place (read both ranks' halves, write the
# sums into both): 0.12-0.18 ms; the training thread 2.9-3.1 ms (one
# process alone, with the faster AVX2 GEMM: 2.67 ms), the loader 0.12-0.15
# ms (64 preads and the byte-to-float table, on the rank's own core now):
# 1.74-1.77x one process in quiet runs. What is left over one process is
# the loader's share of the core, the reduction's pass over the gradients,
# and the optimizer reading gradients half written by the other core
# (sgd_momentum's share of the profile rises from 5.5% to 6.3%).
# Overlapping communication with backward gains nothing here: with one rank
# per core there is no idle core to hide it on, and the reduction is memory
# traffic on the core that computes. Measured 2026-11-24: overlap off was
# 4-10% faster at batch 64 in four runs out of four, the same at 512; so
# ddp's overlap=auto (the default) turns it off where the group reduces in
# shared memory and each rank has one core.
# What is left, against the machine's own ceiling ("lt 2 alone"), measured
# 2026-11-24 (later stop) on the same AMD EPYC, a quiet day: two one-core
# processes at once gave 1.88x one process at batch 64 (each runs 3% slower
# than alone: the shared L3 and memory) and 1.91x at 512; ddp 1.76x and
# 1.87x. Per rank and step at batch 64 (thread_stats.py, perf): training
# thread 2.64 ms, shm worker 0.14 ms (its reduction, ltshm_sum2_f32, 2.9% of
# all samples; barrier spinning 0.7%), loader 0.10 ms; the core is busy 99%
# of the step (2.91 ms) against 2.70 ms for a process of the pair. So the
# gap to the ceiling is the reduction's one pass over the 2.7 MB of
# gradients (read both ranks' halves, write both) and the optimizer reading
# what the other core wrote. Halving the optimizer step (a quick experiment:
# SGD over half the parameters, as a sharded step would run) gave +3.6%
# ddp samples/s, about 1.81x; adding what keeps every rank's copy whole
# (each rank writing its half of the parameters and of the momentum into
# the other's memory: two more half passes, simulated) left -0.6% to +1%.
# So a ZeRO-style sharded step pays here only with the optimizer state
# left sharded (gathered for checkpoints): 1-3%, within this machine's
# run-to-run spread, for group-memory parameters and a sharded state.
# Taking the average inside the optimizer step instead (measured
# 2026-11-25 on the AMD EPYC, Zen 3, 2 cores; lt against lt, ltrun ddp at
# batch 64, interleaved): with the reduction skipped altogether (wrong
# results, timing only) ddp ran 4% faster (45.1K -> 46.9K samples/s, five
# interleaved pairs). A real version of it, each rank reading every rank's
# gradients straight from group memory in the SGD pass between two group
# barriers (sgd_step_avg over 2048-element blocks kept in L1; the
# parameters came out bit for bit as with the allreduce), gained nothing:
# 42.8K against 42.9K over three interleaved pairs (a first version with
# three loops per block was 8% slower). Reading the other core's 2.7 MB in
# the step costs what the reduction's half passes did: the cost is moving
# the gradients between the cores, not the passes. Not kept.
#
# The reference for "ddp / 1 rank" is the one-core process: 2 ranks on 2
# cores can be at most 2x of it, the issue's scale. A single process left
# to OpenBLAS's default threads (one per core) takes the second core as
# well, and turns lt's own small-GEMM kernels off (they run one thread);
# it is printed beside, for what ddp gives over it. Measured 2026-11-24 on
# the AMD EPYC: the all-cores process ran 18-34K samples/s at batch 64 from
# run to run (the one-core one 20-23K), so ddp / all cores is 1.2-2.1x.
#
# Figures: median of REPS, best in parentheses (the machine is shared and
# noisy). The target verdicts use the medians. Nothing passes or fails on a
# figure: the exit status is non-zero only when a program could not run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run_ddp_bench: no build dir ${1:-$root/build}" >&2; exit 1; }
ltrun=$build/ltrun
if [ ! -x "$ltrun" ]; then
    echo "run_ddp_bench: no $ltrun; build first: cmake -S $root -B $build && cmake --build $build -j2" >&2
    exit 1
fi
REPS=${REPS:-3}
BATCHES=${BATCHES:-"64 512"}
LT_SET=${LT_SET:-}
ALLREDUCE=${ALLREDUCE:-1}
ALLREDUCE_ARGS=${ALLREDUCE_ARGS:-}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

log=$(mktemp /tmp/run_ddp_bench.XXXXXX)
trap 'rm -f "$log" "$log".*' EXIT
status=0
echo "# $(date -u +%FT%TZ) $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); build $build; reps $REPS${LT_SET:+; lt ddp extra: $LT_SET}"
echo "# cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(grep -o -w 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# ---- 1. allreduce: lt backend ABI vs gloo direct ----
if [ "$ALLREDUCE" = 1 ]; then
    if [ -x "$build/bench/allreduce_bench" ]; then
        echo
        # shellcheck disable=SC2086
        if ! "$build/bench/allreduce_bench" --plugin "$build/plugins/liblt-backend-gloo.so" $ALLREDUCE_ARGS \
                >"$log.ar" 2>"$log.arerr"; then
            echo "run_ddp_bench: allreduce_bench failed:" >&2; tail -5 "$log.arerr" >&2
            status=1
        fi
        grep -v '^allreduce[_ ]' "$log.ar"
    else
        echo "run_ddp_bench: no $build/bench/allreduce_bench (gloo not found at configure time?); skipped" >&2
    fi
fi

# ---- 2. training throughput ----
have_torch=1
if ! "$TORCH_PY" -c "import torch, numpy" 2>/dev/null; then
    echo "run_ddp_bench: $TORCH_PY cannot import torch and numpy (apt install python3-torch); torch columns empty" >&2
    have_torch=0
fi

common=(--plugin-dir "$build/plugins" --config "$root/examples/fashion_mnist/train.ini" --max-epochs 1 --no-test
        --set trainer.limit_val_batches=0 --set trainer.num_sanity_val_steps=0
        --set trainer.enable_checkpointing=false --set logger.csv=false
        --set trainer.enable_progress_bar=false)
if [ -n "${LT_FASHION_MNIST_DIR:-}" ]; then common+=(--set "data.dir=$LT_FASHION_MNIST_DIR"); fi

# sps_of FILE: the samples/s of ltrun's "epoch 0 done" line in FILE (empty if none).
sps_of() { sed -n 's/^epoch 0 done: .* \([0-9.]*\) samples\/s.*/\1/p' "$1" | tail -1; }

# lt_run NAME BATCH ARGS...: one ltrun, its samples/s appended to the log.
lt_run() {
    local name=$1 b=$2; shift 2
    local t0 t1 sps
    t0=$(date +%s.%N)
    if ! (cd "$root" && "$ltrun" "${common[@]}" --set "data.batch_size=$b" "$@") >"$log.out" 2>&1; then
        echo "run_ddp_bench: ltrun ($name, batch $b) failed:" >&2; tail -5 "$log.out" >&2
        status=1
        return
    fi
    t1=$(date +%s.%N)
    sps=$(sps_of "$log.out")
    if [ -z "$sps" ]; then
        echo "run_ddp_bench: ltrun ($name, batch $b) printed no 'epoch 0 done' line:" >&2; tail -5 "$log.out" >&2
        status=1
        return
    fi
    echo "run=$name batch=$b samples_per_s=$sps" >>"$log"
    printf '  [%s] %-16s batch=%-4s %8.0f samples/s  (command %.1f s)\n' "$rep" "$name" "$b" "$sps" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}

# lt_pair_run NAME BATCH ARGS...: two one-core ltruns at once, each bound
# to its own core (the first two of this shell's CPUs), samples/s summed:
# two ranks that never communicate, i.e. what this machine's shared cache,
# memory and clock leave to 2 ranks before ddp adds anything.
lt_pair_run() {
    local name=$1 b=$2; shift 2
    [ -n "$pair_cpus" ] || return
    local c0=${pair_cpus% *} c1=${pair_cpus#* } sps0 sps1
    (cd "$root" && taskset -c "$c0" "$ltrun" "${common[@]}" --set "data.batch_size=$b" "$@") >"$log.p0" 2>&1 &
    local pid=$!
    (cd "$root" && taskset -c "$c1" "$ltrun" "${common[@]}" --set "data.batch_size=$b" "$@") >"$log.p1" 2>&1
    local st1=$?
    wait "$pid"
    local st0=$?
    sps0=$(sps_of "$log.p0")
    sps1=$(sps_of "$log.p1")
    if [ "$st0" != 0 ] || [ "$st1" != 0 ] || [ -z "$sps0" ] || [ -z "$sps1" ]; then
        echo "run_ddp_bench: ltrun ($name, batch $b, two at once) failed:" >&2
        tail -3 "$log.p0" "$log.p1" >&2
        status=1
        return
    fi
    local sum
    sum=$(awk -v a="$sps0" -v b="$sps1" 'BEGIN { print a + b }')
    echo "run=$name batch=$b samples_per_s=$sum" >>"$log"
    printf '  [%s] %-16s batch=%-4s %8.0f samples/s  (%.0f + %.0f)\n' "$rep" "$name" "$b" "$sum" "$sps0" "$sps1"
}
pair_cpus=""
if command -v taskset >/dev/null; then
    pair_cpus=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(*c[:2]) if len(c) >= 2 else None')
fi
[ -n "$pair_cpus" ] || echo "run_ddp_bench: no taskset or fewer than 2 CPUs: no 'lt 2 alone' column" >&2

torch_run() {
    local name=$1 world=$2
    if ! "$TORCH_PY" "$here/torch_ddp.py" --world "$world" --batch "$(echo "$BATCHES" | tr ' ' ',')" \
            >"$log.out" 2>"$log.err"; then
        echo "run_ddp_bench: torch_ddp.py --world $world failed:" >&2; tail -5 "$log.err" >&2
        status=1
    fi
    sed -n 's/^torch_ddp world=[0-9]* batch=\([0-9]*\) samples_per_s=\([0-9.]*\).*/\1 \2/p' "$log.out" |
        while read -r b sps; do
            echo "run=$name batch=$b samples_per_s=$sps" >>"$log"
            printf '  [%s] %-16s batch=%-4s %8.0f samples/s\n' "$rep" "$name" "$b" "$sps"
        done
}

echo
echo "training runs (Fashion-MNIST MLP, one epoch = 55000 samples; samples/s total over ranks):"
for rep in $(seq 1 "$REPS"); do
    for b in $BATCHES; do
        lt_run lt_single "$b" --strategy single_device --devices 1 --set accelerator.num_threads=1
        lt_run lt_single_all "$b" --strategy single_device --devices 1
        lt_pair_run lt_pair "$b" --strategy single_device --devices 1 --set accelerator.num_threads=1
        # shellcheck disable=SC2086
        lt_run lt_ddp "$b" --strategy ddp --devices 2 $LT_SET
        # shellcheck disable=SC2086
        lt_run lt_ddp_overlap "$b" --strategy ddp --devices 2 --set strategy.overlap=true $LT_SET
        # shellcheck disable=SC2086
        lt_run lt_ddp_nooverlap "$b" --strategy ddp --devices 2 --set strategy.overlap=false $LT_SET
        # shellcheck disable=SC2086
        lt_run lt_ddp_noplace "$b" --strategy ddp --devices 2 --set strategy.place_grads=false $LT_SET
        # shellcheck disable=SC2086
        lt_run lt_ddp_gloo "$b" --strategy ddp --devices 2 --set strategy.process_group_backend=gloo $LT_SET
    done
    if [ "$have_torch" = 1 ]; then
        torch_run torch_single 1
        torch_run torch_ddp 2
    fi
done

python3 - "$log" "$BATCHES" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
    runs.setdefault((kv["run"], int(kv["batch"])), []).append(float(kv["samples_per_s"]))
batches = [int(b) for b in sys.argv[2].split()]
cols = [("lt_single", "lt 1 rank"), ("lt_single_all", "lt 1 rank all cores"), ("lt_pair", "lt 2 alone"),
        ("lt_ddp", "lt ddp"), ("lt_ddp_overlap", "lt ddp overlap"),
        ("lt_ddp_nooverlap", "lt ddp no-overlap"), ("lt_ddp_noplace", "lt ddp own-mem"),
        ("lt_ddp_gloo", "lt ddp gloo"),
        ("torch_single", "torch 1 rank"),
        ("torch_ddp", "torch DDP 2 ranks")]

def med(run, b):
    v = runs.get((run, b))
    return statistics.median(v) if v else None

def best(run, b):
    v = runs.get((run, b))
    return max(v) if v else None

def cell(run, b):
    m = med(run, b)
    return "n/a" if m is None else "%6.0f (%6.0f)" % (m, best(run, b))

def ratio(a, b_, batch, f):
    x, y = f(a, batch), f(b_, batch)
    return None if x is None or y is None or y == 0 else x / y

def rcell(a, b_, batch):
    m, bb = ratio(a, b_, batch, med), ratio(a, b_, batch, best)
    return "n/a" if m is None else "%4.2f (%4.2f)" % (m, bb)

print()
print("samples/s, total over ranks: median of %d (best)" % max((len(v) for v in runs.values()), default=0))
print("%6s" % "batch" + "".join("  %17s" % c[1] for c in cols))
for b in batches:
    print("%6d" % b + "".join("  %17s" % cell(c[0], b) for c in cols))
print()
print("ratios: median (of bests)")
rc = [("lt_ddp", "torch_ddp", "lt ddp / torch DDP"),
      ("lt_ddp_overlap", "torch_ddp", "lt ddp overlap / torch DDP"),
      ("lt_ddp_nooverlap", "torch_ddp", "lt ddp no-overlap / torch DDP"),
      ("lt_ddp_noplace", "torch_ddp", "lt ddp own-mem / torch DDP"),
      ("lt_ddp_gloo", "torch_ddp", "lt ddp gloo / torch DDP"),
      ("lt_ddp", "lt_single", "lt ddp / lt 1 rank"),
      ("lt_ddp_overlap", "lt_single", "lt ddp overlap / lt 1 rank"),
      ("lt_ddp_nooverlap", "lt_single", "lt ddp no-overlap / lt 1 rank"),
      ("lt_ddp_noplace", "lt_single", "lt ddp own-mem / lt 1 rank"),
      ("lt_ddp_gloo", "lt_single", "lt ddp gloo / lt 1 rank"),
      ("lt_ddp", "lt_single_all", "lt ddp / all cores"),
      ("lt_pair", "lt_single", "lt 2 alone / lt 1 rank"),
      ("lt_ddp", "lt_pair", "lt ddp / lt 2 alone"),
      ("lt_single", "torch_single", "lt 1 rank / torch 1 rank"),
      ("torch_ddp", "torch_single", "torch DDP / torch 1 rank")]
print("%6s" % "batch" + "".join("  %30s" % r[2] for r in rc))
for b in batches:
    print("%6d" % b + "".join("  %30s" % rcell(r[0], r[1], b) for r in rc))
print()

def target(run, ref, b, need, what):
    m, bb = ratio(run, ref, b, med), ratio(run, ref, b, best)
    if m is None:
        print("target: %s at batch %d >= %gx: n/a (not measured)" % (what, b, need))
    else:
        print("target: %s at batch %d >= %gx: %.2fx (best %.2fx) -> %s" % (
            what, b, need, m, bb, "met" if m >= need else "not met"))
target("lt_ddp", "torch_ddp", 64, 2.5, "lt ddp (default: auto = shm, overlap auto) / torch DDP")
target("lt_ddp_overlap", "torch_ddp", 64, 2.5, "lt ddp (overlap on) / torch DDP")
target("lt_ddp_nooverlap", "torch_ddp", 64, 2.5, "lt ddp (no overlap) / torch DDP")
target("lt_ddp_gloo", "torch_ddp", 64, 2.5, "lt ddp (gloo backend) / torch DDP")
target("lt_ddp", "lt_single", 64, 1.8, "lt ddp (default: auto = shm, overlap auto) / lt 1 rank")
target("lt_ddp", "lt_single", 512, 1.85, "lt ddp (default: auto = shm, overlap auto) / lt 1 rank")
target("lt_ddp_nooverlap", "lt_single", 512, 1.85, "lt ddp (no overlap) / lt 1 rank")
target("lt_ddp_gloo", "lt_single", 512, 1.85, "lt ddp (gloo backend) / lt 1 rank")
EOF
if [ "$ALLREDUCE" = 1 ] && [ -s "$log.ar" ]; then
    echo
    grep '^allreduce[_ ]' "$log.ar"
fi
exit $status
