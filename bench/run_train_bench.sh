#!/bin/bash
# lt vs PyTorch, single process, one thread, Fashion-MNIST MLP 784-512-512-10:
# training samples/s per batch size, the ratio lt/torch, and the fraction of
# the machine's single-thread GEMM rate lt's step reaches (train_bench times
# the step's eight cblas_sgemm calls in the same run).
#
#   bench/run_train_bench.sh [BUILD_DIR]          (default: build-bench, then build)
#
# Environment:
#   REPS=3                  rounds; each round runs lt then torch for every batch size
#   BATCHES="64 256 1024"
#   LT_BENCH_SET=""         lt settings for every lt run, e.g. "accelerator.isa=generic"
#   SAMPLES=110000          samples per timed run (lt: the long run; its short run is SAMPLES/10)
#   CNN_BATCHES="64"        the CNN example (examples/fashion_mnist/cnn.c) against the same
#                           CNN in PyTorch, after the MLP table; empty to skip
#   CNN_SAMPLES=20000       samples per timed CNN run
#   PIN=                    a CPU list for taskset (e.g. PIN=0) to hold both to those cores
#   TORCH_PY=/usr/bin/python3   Debian's python3-torch 1.13
#   LT_FASHION_MNIST_DIR    data (default /usr/share/datasets/fashion-mnist)
#
# The GEMM-only reference is OpenBLAS's cblas_sgemm; lt's own step runs its
# AVX-512 kernels wherever a dimension is short (the batch at 64; the 10-wide
# output layer at any batch) and OpenBLAS elsewhere, so at batch 64 lt's whole
# step can reach or pass the reference (lt/GEMM rate >= 1.00). Set
# LT_BENCH_SET="accelerator.gemm=openblas" to run lt on OpenBLAS alone (or
# "accelerator.isa=avx2" to force a kernel variant; space-separated settings,
# passed to train_bench as --set; train_bench ignores LT_* variables).
#
# Figures: best of REPS for each side (the machine is shared and noisy; the
# best run is the one least disturbed), medians shown beside. The fraction of
# GEMM rate is best GEMM-only step time / best lt step time. The last column
# compares process CPU time per step (best of each side), a check on how much
# the wall-time ratio was bent by other work on the machine. Nothing here
# passes or fails on a figure: the script only prints (exit status is non-zero
# only when a program could not run at all).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-}
if [ -z "$build" ]; then
    for d in "$root/build-bench" "$root/build"; do
        if [ -x "$d/bench/train_bench" ]; then build=$d; break; fi
    done
fi
bin=${build:+$build/bench/train_bench}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "run_train_bench: no train_bench; build it first:" >&2
    echo "  cmake -S $root -B $root/build-bench && cmake --build $root/build-bench -j2 --target train_bench" >&2
    exit 1
fi
REPS=${REPS:-3}
BATCHES=${BATCHES:-"64 256 1024"}
CNN_BATCHES=${CNN_BATCHES-"64"}
CNN_SAMPLES=${CNN_SAMPLES:-20000}
SAMPLES=${SAMPLES:-110000}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
PIN=${PIN:-}

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
pin=()
if [ -n "$PIN" ]; then pin=(taskset -c "$PIN"); fi

have_torch=1
if ! "$TORCH_PY" -c "import torch, numpy" 2>/dev/null; then
    echo "run_train_bench: $TORCH_PY cannot import torch and numpy (apt install python3-torch); torch column empty" >&2
    have_torch=0
fi

bench_set=()
for kv in ${LT_BENCH_SET:-}; do bench_set+=(--set "$kv"); done
log=$(mktemp /tmp/run_train_bench.XXXXXX)
trap 'rm -f "$log" "$log.cnn"' EXIT
: >"$log.cnn"
status=0
echo "# $(date -u +%FT%TZ) $(getconf _NPROCESSORS_ONLN) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); bin $bin; reps $REPS; samples $SAMPLES${PIN:+; pinned to cpu $PIN}"
# Which machine and which of lt's kernels: the cpu accelerator says at debug level.
echo "# cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(grep -o -w 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "# lt $("$bin" --batch 64 --samples 640 --short-samples 64 --gemm-secs 0.01 --set trainer.log_level=debug \
    "${bench_set[@]}" 2>&1 | grep -m1 -o 'f32 gemm: .*' || echo 'f32 gemm: unknown (train_bench failed)')"
for rep in $(seq 1 "$REPS"); do
    for b in $BATCHES; do
        if ! "${pin[@]}" "$bin" --batch "$b" --samples "$SAMPLES" "${bench_set[@]}" >"$log.out" 2>"$log.err"; then
            echo "run_train_bench: train_bench --batch $b failed:" >&2; tail -5 "$log.err" >&2
            status=1
        fi
        grep -E '^(lt|gemm) batch=' "$log.out" | sed "s/^/rep=$rep /" >>"$log"
        grep -E '^lt batch=' "$log.out" | sed "s/^/  [$rep] /"
        if [ "$have_torch" = 1 ]; then
            if ! "${pin[@]}" "$TORCH_PY" "$here/torch_mlp.py" --batch "$b" --samples "$SAMPLES" >"$log.out" 2>"$log.err"; then
                echo "run_train_bench: torch_mlp.py --batch $b failed:" >&2; tail -5 "$log.err" >&2
                status=1
            fi
            grep -E '^torch batch=' "$log.out" | sed "s/^/rep=$rep /" >>"$log"
            grep -E '^torch batch=' "$log.out" | sed "s/^/  [$rep] /"
        fi
    done
done
for rep in $(seq 1 "$REPS"); do
    for b in $CNN_BATCHES; do
        if ! "${pin[@]}" "$bin" --model cnn --batch "$b" --samples "$CNN_SAMPLES" "${bench_set[@]}" >"$log.out" 2>"$log.err"; then
            echo "run_train_bench: train_bench --model cnn --batch $b failed:" >&2; tail -5 "$log.err" >&2
            status=1
        fi
        grep -E '^lt model=cnn ' "$log.out" | tee -a "$log.cnn" | sed "s/^/  [$rep] /"
        if [ "$have_torch" = 1 ]; then
            if ! "${pin[@]}" "$TORCH_PY" "$here/torch_mlp.py" --model cnn --batch "$b" --samples "$CNN_SAMPLES" >"$log.out" 2>"$log.err"; then
                echo "run_train_bench: torch_mlp.py --model cnn --batch $b failed:" >&2; tail -5 "$log.err" >&2
                status=1
            fi
            grep -E '^torch model=cnn ' "$log.out" | tee -a "$log.cnn" | sed "s/^/  [$rep] /"
        fi
    done
done
rm -f "$log.out" "$log.err"

# The table (any python3 will do; it only parses key=value lines).
python3 - "$log" "$BATCHES" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(t.split("=", 1) for t in f if "=" in t)
    kind, b = f[1], int(kv["batch"])
    r = rows.setdefault(b, {"lt": [], "gemm": [], "torch": [], "lt_cpu": [], "torch_cpu": [],
                            "gemm_calls": {}})
    if kind == "lt":
        r["lt"].append(float(kv["samples_per_s"]))
        r["gemm"].append(float(kv["gemm_step_ms"]))
        if "cpu_step_ms" in kv: r["lt_cpu"].append(float(kv["cpu_step_ms"]))
    elif kind == "torch":
        r["torch"].append(float(kv["samples_per_s"]))
        if "cpu_step_ms" in kv: r["torch_cpu"].append(float(kv["cpu_step_ms"]))
    elif kind == "gemm":
        c = r["gemm_calls"].setdefault(kv["call"], [kv, []])
        c[1].append(float(kv["best_ms"]))

def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)

print()
print("MLP 784-512-512-10, SGD momentum 0.9, 1 thread; best of %d runs (median)" %
      max((len(r["lt"]) for r in rows.values()), default=0))
print("%6s  %17s  %17s  %12s  %14s  %10s  %13s" % ("batch", "lt samples/s", "torch samples/s",
      "lt/torch", "lt/GEMM rate", "GEMM-only", "by CPU time"))
ratio = {}
for b in [int(x) for x in sys.argv[2].split()]:
    r = rows.get(b)
    if not r or not r["lt"]:
        print("%6d  %17s" % (b, "n/a (lt failed)"))
        continue
    lt_best, lt_med = max(r["lt"]), statistics.median(r["lt"])
    gemm_ms = min(r["gemm"])
    gemm_sps = b / (gemm_ms * 1e-3)
    frac = gemm_ms / (b / lt_best * 1e3)
    if r["torch"]:
        t_best, t_med = max(r["torch"]), statistics.median(r["torch"])
        ratio[b] = lt_best / t_best
        ts = "%7.0f (%7.0f)" % (t_best, t_med)
        rs = "%5.2f (%4.2f)" % (ratio[b], lt_med / t_med)
    else:
        ts, rs = "n/a", "n/a"
    cs = "n/a"
    if r["lt_cpu"] and r["torch_cpu"]:
        cs = "%.2f" % (min(r["torch_cpu"]) / min(r["lt_cpu"]))
    print("%6d  %7.0f (%7.0f)  %17s  %12s  %14s  %10s  %13s" % (
        b, lt_best, lt_med, ts, rs, "%.2f" % frac, "%.0f/s" % gemm_sps, cs))
print("(lt/GEMM rate: GEMM-only step time / lt step time, i.e. the fraction of the")
print(" single-thread cblas_sgemm rate lt's whole step reaches; GEMM-only: samples/s")
print(" if a step were only its 8 GEMMs; by CPU time: lt/torch from the best process")
print(" CPU time per step, less sensitive to a shared machine than wall time)")
print()
def flops(call):  # call = [its key=value fields, its times in ms]
    return 2 * int(call[0]["m"]) * int(call[0]["n"]) * int(call[0]["k"])

flops_note = []
for b in sorted(rows):
    calls = rows[b]["gemm_calls"]
    if calls:
        flops_note.append("  batch %5d: " % b + "  ".join(
            "%s %.3f ms %.0f GF/s" % (name, min(v[1]),
                                      flops(v) / min(v[1]) * 1e-6)
            for name, v in calls.items()))
if flops_note:
    print("GEMM-only step, per call (best):")
    print("\n".join(flops_note))
    print()
# The ceiling lt's step can reach on this CPU: only its GEMMs, each at the
# best rate any call reached in this run (the large-batch shapes, near the
# core's FMA peak), nothing else (no activations, loss, optimizer, data).
peak = 0.0
for b in rows:
    for v in rows[b]["gemm_calls"].values():
        peak = max(peak, flops(v) / min(v[1]) * 1e-6)
if peak > 0:
    for b in sorted(rows):
        calls = rows[b]["gemm_calls"]
        if not calls:
            continue
        sps = b / (sum(flops(v) for v in calls.values()) / (peak * 1e9))
        t = max(rows[b]["torch"]) if rows[b]["torch"] else None
        print("GEMM ceiling: batch %d: %.0f samples/s if a step were only its GEMMs at %.0f GF/s "
              "(this run's best call)%s" % (b, sps, peak, "" if t is None else ", %.2fx torch" % (sps / t)))
    print()
def target(b, need, what):
    if b not in ratio:
        print("target: lt >= %gx torch at batch %d (%s): n/a (not measured)" % (need, b, what))
    else:
        print("target: lt >= %gx torch at batch %d (%s): %.2fx -> %s" % (
            need, b, what, ratio[b], "met" if ratio[b] >= need else "NOT met"))
target(64, 1.5, "per-step overhead counts")
target(1024, 1.0, "GEMM counts")
EOF

if [ -s "$log.cnn" ]; then
python3 - "$log.cnn" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(t.split("=", 1) for t in f if "=" in t)
    r = rows.setdefault(int(kv["batch"]), {"lt": [], "torch": []})
    r[f[0]].append(float(kv["samples_per_s"]))
print()
print("CNN conv3x3 32 - pool - conv3x3 64 - pool - 128 - 10, same optimizer, 1 thread; best (median)")
print("%6s  %17s  %17s  %12s" % ("batch", "lt samples/s", "torch samples/s", "lt/torch"))
for b in sorted(rows):
    r = rows[b]
    lt = "%7.0f (%7.0f)" % (max(r["lt"]), statistics.median(r["lt"])) if r["lt"] else "n/a"
    to = "%7.0f (%7.0f)" % (max(r["torch"]), statistics.median(r["torch"])) if r["torch"] else "n/a"
    ra = ("%5.2f (%4.2f)" % (max(r["lt"]) / max(r["torch"]),
                             statistics.median(r["lt"]) / statistics.median(r["torch"]))
          if r["lt"] and r["torch"] else "n/a")
    print("%6d  %17s  %17s  %12s" % (b, lt, to, ra))
EOF
fi
exit $status
