#!/bin/bash
# lt's precision plugins side by side, and PyTorch's CPU mixed precision
# beside them, in one run (issue 10):
#   1. the Fashion-MNIST MLP 784-512-512-10 (examples/fashion_mnist/train.ini)
#      at batch 64, 256 and 1024, single_device, one thread: training
#      samples/s and the process's peak RSS for lt 32-true, 16-mixed,
#      bf16-mixed and bf16-true (bench/train_bench --set trainer.precision=...),
#      and for PyTorch fp32 and torch.autocast("cpu", dtype=torch.bfloat16)
#      (bench/torch_mlp.py --autocast bf16), one thread;
#   2. the CNN example (examples/fashion_mnist/cnn.ini) at batch 64, the same
#      columns;
#   3. the ratios lt bf16-mixed / lt 32-true (target >= 0.9 on a CPU without
#      bf16 instructions), lt 16-mixed / lt 32-true, and lt bf16-mixed /
#      torch bf16 autocast (target >= 1.5), with a met / NOT met verdict;
#   4. which GEMM kernels lt ran: the cpu accelerator's debug lines that
#      mention gemm, per precision, and the CPU's flags that decide a 16-bit
#      GEMM path (avx2 fma f16c avx512f avx512_bf16 amx_bf16);
#   5. ddp's gradient bytes per step: `ltrun --strategy ddp --devices 2` for
#      a few steps at log_level=debug in 32-true, bf16-mixed and 16-mixed;
#      the strategy logs "N bytes (dtype) sent per step"; the 16-bit runs must
#      send 0.5 of the 32-true bytes.
#
#   bench/run_precision_bench.sh [BUILD_DIR]      (default: build-bench, then build)
#
# How lt is timed: train_bench times two lt_trainer_fit runs that differ only
# in max_steps (SAMPLES and SAMPLES/10 samples) and divides the difference,
# so plugin loading, data decoding and the first steps' allocations cancel
# (see bench/train_bench.c); it runs with --gemm-secs 0 (no GEMM reference),
# so that its peak RSS is the training runs' alone. PyTorch times SAMPLES
# samples after a warm-up. PyTorch's bf16 autocast is an order of magnitude
# slower than its fp32 on a CPU without AVX-512 BF16, so its runs train fewer
# samples (TORCH_LOWP_SAMPLES, TORCH_CNN_LOWP_SAMPLES) after 3 warm-up steps.
#
# Peak memory: the maximum resident set size of the process (lt: train_bench,
# both fits; torch: the python process, the torch libraries included), from
# GNU time (/usr/bin/time -f %M) when it is installed, else from python3's
# resource.getrusage(RUSAGE_CHILDREN) around the run (the same kernel figure,
# wait4's ru_maxrss); the script installs nothing. It counts the data set,
# the libraries and the loader too, so compare lt's columns with each other
# (the delta to 32-true is printed), not with torch's.
#
# Duration: with the default REPS=2, 6 minutes measured on the 2-core test
# machine while other work kept 1.3 of its cores busy; less on idle cores.
# Each of the 48 training runs first waits up to IDLE_WAIT s for other work
# on the machine to stop, and PyTorch's start (about 3 s a run) is a good
# part of the rest.
#
# Environment:
#   REPS=2                  rounds; each runs every precision, lt then torch, at every batch size
#   BATCHES="64 256 1024"   MLP batch sizes
#   PRECISIONS="32-true 16-mixed bf16-mixed bf16-true"   lt's columns (32-true is the reference)
#   SAMPLES=40000           samples per timed lt run (its short run: SAMPLES/10) and per torch fp32 run
#   TORCH_LOWP_SAMPLES=4096 samples per timed torch bf16-autocast MLP run
#   CNN_BATCHES="64"        empty to skip the CNN
#   CNN_SAMPLES=8000        samples per timed CNN run (lt, torch fp32)
#   TORCH_CNN_LOWP_SAMPLES=1024   samples per timed torch bf16-autocast CNN run
#   DDP_STEPS=3             steps of each ddp run (0 skips the ddp section)
#   LT_BENCH_SET=""         lt settings for every train_bench run, e.g. "accelerator.gemm=openblas",
#                           or "accelerator.bf16_gemm=native" on a CPU with AVX-512 BF16 (the
#                           dot-product kernel, which auto does not pick until measured there)
#   PIN=                    a CPU list for taskset (e.g. PIN=0) to hold lt and torch to those cores
#   IDLE_WAIT=1             seconds each run may wait for the machine to go idle first (0: none)
#   TORCH_PY                default /opt/torch2/bin/python (PyTorch 2.x from PyPI) when it
#                           imports torch and numpy, else /usr/bin/python3; torch columns
#                           are empty (n/a) when neither does
#   LT_FASHION_MNIST_DIR    data (default /usr/share/datasets/fashion-mnist)
#
# Threads: train_bench sets OpenBLAS to one thread itself; torch_mlp.py calls
# torch.set_num_threads(1); the ddp runs set accelerator.num_threads=1 (one
# core per rank). OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1 is exported as well.
#
# Figures: best of REPS (median in parentheses); the ratios and verdicts use
# the bests (the machine is shared and noisy; the best run is the one least
# disturbed). Each run's line reports the cores other work kept busy during
# it (/proc/stat less this script's own children), marked * above 0.25.
# Nothing passes or fails on a figure: the exit status is non-zero only when
# a program could not run at all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-}
if [ -z "$build" ]; then
    for d in "$root/build-bench" "$root/build"; do
        if [ -x "$d/bench/train_bench" ]; then build=$d; break; fi
    done
fi
build=$(cd "${build:-/nonexistent}" 2>/dev/null && pwd) || build=
bin=${build:+$build/bench/train_bench}
ltrun=${build:+$build/ltrun}
if [ -z "$build" ] || [ ! -x "$bin" ] || [ ! -x "$ltrun" ]; then
    echo "run_precision_bench: no train_bench or ltrun; build them first:" >&2
    echo "  cmake -S $root -B $root/build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build $root/build-bench -j2" >&2
    exit 1
fi
REPS=${REPS:-2}
BATCHES=${BATCHES:-"64 256 1024"}
PRECISIONS=${PRECISIONS:-"32-true 16-mixed bf16-mixed bf16-true"}
SAMPLES=${SAMPLES:-40000}
TORCH_LOWP_SAMPLES=${TORCH_LOWP_SAMPLES:-4096}
CNN_BATCHES=${CNN_BATCHES-"64"}
CNN_SAMPLES=${CNN_SAMPLES:-8000}
TORCH_CNN_LOWP_SAMPLES=${TORCH_CNN_LOWP_SAMPLES:-1024}
DDP_STEPS=${DDP_STEPS:-3}
PIN=${PIN:-}
IDLE_WAIT=${IDLE_WAIT:-1}
for p in $PRECISIONS 32-true bf16-mixed 16-mixed; do
    if [ ! -e "$build/plugins/liblt-precision-$p.so" ]; then
        echo "run_precision_bench: no $build/plugins/liblt-precision-$p.so; rebuild: cmake --build $build -j2" >&2
        exit 1
    fi
done

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
pin=()
if [ -n "$PIN" ]; then pin=(taskset -c "$PIN"); fi

# PyTorch: 2.x from PyPI in /opt/torch2 when it is there, else Debian's.
if [ -z "${TORCH_PY:-}" ]; then
    TORCH_PY=/usr/bin/python3
    if /opt/torch2/bin/python -c "import torch, numpy" 2>/dev/null; then TORCH_PY=/opt/torch2/bin/python; fi
fi
have_torch=1
torch_note=
if ! torch_ver=$("$TORCH_PY" -c "import torch, numpy; print(torch.__version__)" 2>/dev/null); then
    have_torch=0
    torch_note="$TORCH_PY cannot import torch and numpy: torch columns empty (n/a)"
    echo "run_precision_bench: $torch_note" >&2
fi

# Peak RSS: GNU time when installed, else python3's getrusage of the child.
if [ -x /usr/bin/time ] && /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
    rss_how="GNU time (/usr/bin/time -f %M)"
    rss_run() { local f=$1; shift; /usr/bin/time -f %M -o "$f" "$@"; }
else
    rss_how="python3 resource.getrusage(RUSAGE_CHILDREN) (/usr/bin/time is not installed; apt install time for GNU time)"
    rss_run() {
        local f=$1; shift
        python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$f" "$@"
    }
fi

bench_set=()
for kv in ${LT_BENCH_SET:-}; do bench_set+=(--set "$kv"); done
log=$(mktemp /tmp/run_precision_bench.XXXXXX)
trap 'rm -rf "$log" "$log".*' EXIT
status=0

flags=$(grep -o -w 'avx2\|fma\|f16c\|avx512f\|avx512_bf16\|avx512_fp16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//')
echo "# $(date -u +%FT%TZ) $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); build $build; reps $REPS; samples $SAMPLES (torch bf16 $TORCH_LOWP_SAMPLES)${PIN:+; pinned to cpu $PIN}${LT_BENCH_SET:+; lt extra: $LT_BENCH_SET}"
echo "# cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); flags: ${flags:-none of avx2 fma f16c avx512f avx512_bf16 amx_bf16}"
echo "# torch: ${torch_ver:-none} ($TORCH_PY); peak RSS from $rss_how"

# ---- which kernels ------------------------------------------------------
# The cpu accelerator logs its GEMM choice at debug level; a short run per
# precision shows every line that mentions gemm (the 16-bit path's too, if
# it logs one).
echo
echo "GEMM kernels (cpu accelerator, debug log of a 10-step run per precision):"
lowp_logged=0
for p in $PRECISIONS; do
    lines=$("$bin" --batch 64 --samples 640 --short-samples 64 --gemm-secs 0 --set "trainer.precision=$p" \
        --set trainer.log_level=debug "${bench_set[@]}" 2>&1 | grep -i 'gemm' | grep -v '^#' | sed 's/^lt //' | sort -u)
    if [ -z "$lines" ]; then
        echo "  $p: no gemm line (train_bench failed?)"
        continue
    fi
    while IFS= read -r l; do echo "  $p: $l"; done <<<"$lines"
    if [ "$p" != 32-true ] && grep -qv 'f32 gemm:' <<<"$lines"; then lowp_logged=1; fi
done
if [ "$lowp_logged" = 0 ]; then
    echo "  (the 16-bit precisions log nothing of their own about GEMM; this CPU's flags that decide"
    echo "   a bf16/f16 GEMM path: $(for f in avx2 fma f16c avx512f avx512_bf16 amx_bf16; do
        if grep -qw "$f" <<<"$flags"; then printf '%s=yes ' "$f"; else printf '%s=no ' "$f"; fi; done | sed 's/ $//'))"
fi

# idle wait and the other load of each run
source "$(dirname "$0")/other_load.sh"

# record MODEL SIDE PRECISION BATCH SAMPLES_PER_S: one log line and one progress line.
record() {
    local rss
    rss=$(tail -1 "$log.rss" 2>/dev/null)
    case $rss in '' | *[!0-9]*) rss=0 ;; esac
    echo "model=$1 side=$2 prec=$3 batch=$4 sps=$5 rss_kb=$rss other=$other" >>"$log"
    printf '  [%s] %-3s %-5s %-13s batch=%-4s %8.0f samples/s  peak RSS %6.1f MB  (%.1f s; other load %s%s)\n' \
        "$rep" "$1" "$2" "$3" "$4" "$5" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$wall" "$other" \
        "$(awk -v o="$other" 'BEGIN { if (o > 0.25) print " *" }')"
}

# timed_run SIDE MODEL TAG BATCH CMD...: one training run of lt's
# train_bench or torch_mlp.py (SIDE lt or torch), its "SIDE ... samples_per_s="
# figure recorded under TAG, or a message and status 1.
timed_run() {
    local side=$1 model=$2 tag=$3 b=$4 sps
    shift 4
    wait_idle
    t_start
    if ! rss_run "$log.rss" "${pin[@]}" "$@" >"$log.out" 2>"$log.err"; then
        echo "run_precision_bench: $side $model $tag batch $b failed:" >&2
        tail -5 "$log.err" >&2
        status=1
        return
    fi
    t_stop
    sps=$(sed -n "s/^$side \(model=cnn \)\{0,1\}batch=[0-9]* samples_per_s=\([0-9.]*\) .*/\2/p" "$log.out" | tail -1)
    if [ -z "$sps" ]; then
        echo "run_precision_bench: no figure from $side $model $tag batch $b" >&2
        status=1
        return
    fi
    record "$model" "$side" "$tag" "$b" "$sps"
}

# lt_run MODEL PRECISION BATCH SAMPLES
lt_run() {
    timed_run lt "$1" "$2" "$3" "$bin" --model "$1" --batch "$3" --samples "$4" --gemm-secs 0 \
        --set "trainer.precision=$2" "${bench_set[@]}"
}

# torch_run MODEL AUTOCAST BATCH SAMPLES WARMUP
torch_run() {
    [ "$have_torch" = 1 ] || return 0
    local tag=32-true
    [ "$2" = none ] || tag="$2-autocast"
    timed_run torch "$1" "$tag" "$3" "$TORCH_PY" "$here/torch_mlp.py" --model "$1" --autocast "$2" \
        --batch "$3" --samples "$4" --warmup "$5"
}

echo
echo "training runs (1 thread; samples/s at steady state, peak RSS of the process;"
echo "other load: cores busy with other work during the run, * above 0.25):"
for rep in $(seq 1 "$REPS"); do
    for b in $BATCHES; do
        for p in $PRECISIONS; do lt_run mlp "$p" "$b" "$SAMPLES"; done
        torch_run mlp none "$b" "$SAMPLES" 20
        torch_run mlp bf16 "$b" "$TORCH_LOWP_SAMPLES" 3
    done
    for b in $CNN_BATCHES; do
        for p in $PRECISIONS; do lt_run cnn "$p" "$b" "$CNN_SAMPLES"; done
        torch_run cnn none "$b" "$CNN_SAMPLES" 10
        torch_run cnn bf16 "$b" "$TORCH_CNN_LOWP_SAMPLES" 3
    done
done

# ---- ddp bytes per step ----------------------------------------------------
if [ "$DDP_STEPS" -gt 0 ]; then
    echo
    echo "ddp gradient bytes per step (ltrun --strategy ddp --devices 2, $DDP_STEPS steps, log_level=debug):"
    ddp_common=(--plugin-dir "$build/plugins" --config "$root/examples/fashion_mnist/train.ini"
                --strategy ddp --devices 2 --set accelerator.num_threads=1
                --set "trainer.max_steps=$DDP_STEPS" --no-test --set trainer.limit_val_batches=0
                --set trainer.num_sanity_val_steps=0 --set trainer.enable_checkpointing=false
                --set logger.csv=false --set trainer.enable_progress_bar=false
                --set trainer.log_level=debug --set "trainer.default_root_dir=$log.ddp")
    if [ -n "${LT_FASHION_MNIST_DIR:-}" ]; then ddp_common+=(--set "data.dir=$LT_FASHION_MNIST_DIR"); fi
    for p in 32-true bf16-mixed 16-mixed; do
        if ! (cd "$root" && "$ltrun" "${ddp_common[@]}" --precision "$p") >"$log.out" 2>&1; then
            echo "run_precision_bench: ltrun --strategy ddp --precision $p failed:" >&2; tail -5 "$log.out" >&2
            status=1
            continue
        fi
        line=$(grep -m1 -o '[0-9]* gradients in [0-9]* buckets, .* [0-9]* bytes ([a-z0-9]*) sent per step' "$log.out")
        if [ -z "$line" ]; then
            echo "  $p: ddp logged no 'bytes (dtype) sent per step' line"
            status=1
            continue
        fi
        echo "  $p: $line"
        bytes=$(sed -n 's/.* \([0-9][0-9]*\) bytes (\([a-z0-9]*\)) sent per step.*/\1 \2/p' <<<"$line")
        echo "model=mlp side=ddp prec=$p bytes=${bytes% *} dtype=${bytes#* }" >>"$log"
    done
fi

# ---- tables (any python3; it only parses key=value lines) -------------------
python3 - "$log" "$BATCHES" "$CNN_BATCHES" "$PRECISIONS" "$have_torch" "$torch_note" <<'EOF'
import statistics, sys
log, batches, cnn_batches, precs, have_torch, torch_note = sys.argv[1:7]
batches = [int(b) for b in batches.split()]
cnn_batches = [int(b) for b in cnn_batches.split()]
precs = precs.split()
runs, ddp, others = {}, {}, []
for line in open(log):
    kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
    if kv["side"] == "ddp":
        ddp[kv["prec"]] = (int(kv["bytes"]), kv["dtype"])
        continue
    others.append(float(kv["other"]))
    r = runs.setdefault((kv["model"], kv["side"], kv["prec"], int(kv["batch"])), [])
    r.append((float(kv["sps"]), int(kv["rss_kb"])))

cols = [("lt", p, "lt " + p) for p in precs] + [("torch", "32-true", "torch fp32"),
                                               ("torch", "bf16-autocast", "torch bf16 autocast")]

def best(model, side, prec, b):
    v = runs.get((model, side, prec, b))
    return max(x for x, _ in v) if v else None

def med(model, side, prec, b):
    v = runs.get((model, side, prec, b))
    return statistics.median(x for x, _ in v) if v else None

def rss(model, side, prec, b):
    v = [k for _, k in runs.get((model, side, prec, b), []) if k > 0]
    return max(v) / 1024 if v else None

def ratio(model, a, ref, b):
    x, y = best(model, *a, b), best(model, *ref, b)
    return None if x is None or not y else x / y

W = 21
def table(model, title, bs):
    n = max((len(v) for k, v in runs.items() if k[0] == model), default=0)
    print()
    print("%s; samples/s, best of %d (median)" % (title, n))
    print("%-6s" % "batch" + "".join("%*s" % (W, c[2]) for c in cols))
    for b in bs:
        cells = []
        for side, prec, _ in cols:
            x = best(model, side, prec, b)
            cells.append("n/a" if x is None else "%.0f (%.0f)" % (x, med(model, side, prec, b)))
        print("%-6d" % b + "".join("%*s" % (W, c) for c in cells))
    print("peak RSS, MB (max of the runs); lt: delta to lt 32-true")
    print("%-6s" % "batch" + "".join("%*s" % (W, c[2]) for c in cols))
    for b in bs:
        cells, base = [], rss(model, "lt", "32-true", b)
        for side, prec, _ in cols:
            m = rss(model, side, prec, b)
            if m is None:
                cells.append("n/a")
            elif side == "lt" and base is not None and prec != "32-true":
                cells.append("%.1f (%+.1f)" % (m, m - base))
            else:
                cells.append("%.1f" % m)
        print("%-6d" % b + "".join("%*s" % (W, c) for c in cells))
    print("ratios (bests)")
    rr = [(("lt", "bf16-mixed"), ("lt", "32-true"), "lt bf16-mixed / lt 32-true"),
          (("lt", "16-mixed"), ("lt", "32-true"), "lt 16-mixed / lt 32-true"),
          (("lt", "bf16-true"), ("lt", "32-true"), "lt bf16-true / lt 32-true"),
          (("lt", "bf16-mixed"), ("torch", "bf16-autocast"), "lt bf16-mixed / torch bf16 autocast"),
          (("lt", "32-true"), ("torch", "32-true"), "lt 32-true / torch fp32"),
          (("torch", "bf16-autocast"), ("torch", "32-true"), "torch bf16 autocast / torch fp32")]
    print("%-38s" % "batch" + "".join("%8d" % b for b in bs))
    for a, ref, what in rr:
        if any(side == "lt" and prec not in precs for side, prec in (a, ref)):
            continue
        print("%-38s" % what + "".join("%8s" % ("n/a" if ratio(model, a, ref, b) is None
                                                 else "%.2f" % ratio(model, a, ref, b)) for b in bs))
    for b in bs:
        for a, ref, need, what in [(("lt", "bf16-mixed"), ("lt", "32-true"), 0.9,
                                    "lt bf16-mixed / lt 32-true"),
                                   (("lt", "bf16-mixed"), ("torch", "bf16-autocast"), 1.5,
                                    "lt bf16-mixed / torch bf16 autocast")]:
            x = ratio(model, a, ref, b)
            print("target: %s %s at batch %d >= %.1f: %s" % (
                model, what, b, need,
                "n/a (not measured)" if x is None else "%.2f -> %s" % (x, "met" if x >= need else "NOT met")))

table("mlp", "MLP 784-512-512-10, SGD momentum 0.9, 1 thread", batches)
if cnn_batches:
    table("cnn", "CNN conv3x3 32 - pool - conv3x3 64 - pool - 128 - 10, same optimizer, 1 thread",
          cnn_batches)
if others:
    busy = sum(o > 0.25 for o in others)
    print()
    print("other load during the runs: median %.2f, max %.2f cores; %d of %d runs above 0.25%s" % (
        statistics.median(others), max(others), busy, len(others),
        " (discount the figures; rerun on an idle machine for verdicts)" if busy else ""))
if have_torch != "1":
    print()
    print("note: " + torch_note)

if ddp:
    print()
    print("ddp gradient bytes sent per step (MLP; rank 0's log):")
    for p in ("32-true", "bf16-mixed", "16-mixed"):
        if p in ddp:
            print("  %-11s %9d bytes (%s)" % (p, ddp[p][0], ddp[p][1]))
        else:
            print("  %-11s n/a" % p)
    base = ddp.get("32-true")
    for p in ("bf16-mixed", "16-mixed"):
        if base and p in ddp:
            x = ddp[p][0] / base[0]
            print("target: ddp bytes %s / 32-true = 0.5: %.3f -> %s" % (p, x, "met" if x == 0.5 else "NOT met"))
        else:
            print("target: ddp bytes %s / 32-true = 0.5: n/a (not measured)" % p)
EOF
exit $status
