#!/bin/bash
# lt's gpu accelerator vs PyTorch eager on the same GPU, in the same run:
# training samples/s of the Fashion-MNIST MLP (784-512-512-10) and the CNN
# example (conv3x3 32 - pool - conv3x3 64 - pool - 128 - 10) at batch 64 and
# 1024, float32, SGD lr 0.05 momentum 0.9, one process, one GPU.
#
#   bench/run_gpu_bench.sh [BUILD_DIR]      (default: build-gpu; needs bench/train_bench
#                                            and plugins/liblt-accelerator-gpu.so)
#
# lt: bench/train_bench --set trainer.accelerator=gpu --gemm-secs 0, as
# bench/run_train_bench.sh measures the cpu: two fits that differ only in
# max_steps, steady-state step time = (T_long - T_short) / (steps_long -
# steps_short), so start-up (CUDA context, cuBLAS handle, reading the data)
# cancels out. The data go through lt's loader (gathered on the host, copied
# to the GPU each step).
# PyTorch: bench/gpu_torch.py, the same models, loss, optimizer and batches,
# eager (no torch.compile, no CUDA graphs), PyTorch's default TF32 settings
# (printed), timed between two torch.cuda.synchronize() after a warm-up. Two
# ways to feed it: data=device (the whole set on the GPU, batches gathered
# there: PyTorch's best case) and data=host (gathered on the host and copied
# each step, as lt does). The ratio lt/torch is taken against the FASTER of
# the two, so a target is met only if lt beats PyTorch's best.
# Targets (the GPU issue): batch 64 lt >= 2x PyTorch eager (per-step overhead
# counts: kernel launches, Python), batch 1024 lt >= 1x (the GPU's arithmetic
# counts). Nothing here passes or fails on a figure: the exit status is
# non-zero only when a program could not run. PyTorch is skipped, saying why,
# when no python3 with a CUDA-enabled torch is found.
#
# Environment:
#   REPS=3                rounds; each runs lt then torch for every model and batch
#   BATCHES="64 1024"     batch sizes
#   MODELS="mlp cnn"      models
#   SAMPLES=110000        samples per timed MLP run (lt: the long run; the short one SAMPLES/10)
#   CNN_SAMPLES=55000     samples per timed CNN run
#   TORCH_PY=python3      the interpreter holding a CUDA-enabled torch
#   LT_FASHION_MNIST_DIR  data (default /usr/share/datasets/fashion-mnist)
#   CUDA_VISIBLE_DEVICES  as usual: both sides use the first visible GPU
# The last lines, "gpu_bench model=... batch=... lt=... torch=... ratio=...
# target=... verdict=...", are for scripts (tests/gpu/run.sh reads them).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build-gpu}
bin=$build/bench/train_bench
if [ ! -x "$bin" ]; then
    echo "run_gpu_bench: no $bin; build first:" >&2
    echo "  cmake -S $root -B $build -DLT_WITH_CUDA=ON && cmake --build $build -j" >&2
    exit 1
fi
if [ ! -e "$build/plugins/liblt-accelerator-gpu.so" ]; then
    echo "run_gpu_bench: no $build/plugins/liblt-accelerator-gpu.so (configure with -DLT_WITH_CUDA=ON)" >&2
    exit 1
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "run_gpu_bench: no GPU here (nvidia-smi lists none): nothing to measure" >&2
    exit 77
fi
REPS=${REPS:-3}
BATCHES=${BATCHES:-"64 1024"}
MODELS=${MODELS:-"mlp cnn"}
SAMPLES=${SAMPLES:-110000}
CNN_SAMPLES=${CNN_SAMPLES:-55000}
TORCH_PY=${TORCH_PY:-python3}
export LT_FASHION_MNIST_DIR=${LT_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

log=$(mktemp /tmp/run_gpu_bench.XXXXXX)
trap 'rm -f "$log" "$log.out" "$log.err"' EXIT
status=0

# The machine: which GPU, driver, toolkit, CPU; what PyTorch is there.
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0 2>/dev/null | head -n 1)
nvcc_v=$( (command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null |
          sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "# $(date -u +%FT%TZ) run_gpu_bench: build $build; reps $REPS; batches $BATCHES; models $MODELS"
echo "# gpu 0: ${gpu:-unknown} (name, driver, memory); $(nvidia-smi -L | grep -c '^GPU ') GPU(s) visible; CUDA toolkit ${nvcc_v:-unknown}"
echo "# cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
have_torch=0
torch_why=
if ! command -v "$TORCH_PY" >/dev/null 2>&1; then
    torch_why="no $TORCH_PY on PATH"
else
    read -r t_ver t_cuda t_ok t_exe < <("$TORCH_PY" -c 'import sys, torch, numpy
print(torch.__version__, torch.version.cuda, int(torch.cuda.is_available()), sys.executable)' 2>/dev/null)
    if [ -z "${t_ver:-}" ]; then
        torch_why="$TORCH_PY cannot import torch and numpy"
    elif [ "$t_ok" != 1 ]; then
        torch_why="$t_exe's torch $t_ver sees no CUDA device (its CUDA build: $t_cuda)"
    else
        have_torch=1
        echo "# torch: $t_exe torch $t_ver, CUDA $t_cuda"
    fi
fi
[ $have_torch = 1 ] || echo "# torch: skipped: $torch_why; the PyTorch column stays empty"

lt_run() { # lt_run MODEL REP
    local m=$1 rep=$2 s=$SAMPLES
    [ "$m" = cnn ] && s=$CNN_SAMPLES
    if ! "$bin" --model "$m" --batch "$(echo $BATCHES | tr ' ' ,)" --samples "$s" --gemm-secs 0 \
            --set trainer.accelerator=gpu >"$log.out" 2>"$log.err"; then
        echo "run_gpu_bench: lt train_bench --model $m on the gpu failed:" >&2
        tail -n 5 "$log.err" >&2
        status=1
    fi
    # train_bench names the model only for the CNN; make every line say it.
    grep -E '^lt (model=cnn )?batch=' "$log.out" | sed -E "s/^lt (model=cnn )?/lt model=$m /" |
        tee -a "$log" | sed "s/^/  [$rep] /"
}
torch_run() { # torch_run MODEL REP
    local m=$1 rep=$2 s=$SAMPLES
    [ "$m" = cnn ] && s=$CNN_SAMPLES
    if ! "$TORCH_PY" "$here/gpu_torch.py" --model "$m" --batch "$(echo $BATCHES | tr ' ' ,)" \
            --samples "$s" --data device,host >"$log.out" 2>"$log.err"; then
        echo "run_gpu_bench: gpu_torch.py --model $m failed:" >&2
        tail -n 5 "$log.err" >&2
        status=1
    fi
    [ "$rep" = 1 ] && grep -m1 '^# torch' "$log.out" | sed 's/^# /# peer: /'
    grep -E '^torch model=' "$log.out" | tee -a "$log" | sed "s/^/  [$rep] /"
}

for rep in $(seq 1 "$REPS"); do
    for m in $MODELS; do
        lt_run "$m" "$rep"
        [ $have_torch = 1 ] && torch_run "$m" "$rep"
    done
done

# The table: best of the rounds for each side (medians beside).
python3 - "$log" "$BATCHES" "$MODELS" "$have_torch" <<'EOF'
import statistics, sys
log, batches, models, have_torch = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4] == "1"
runs = {}  # (side, model, batch) -> [samples/s]
for line in open(log):
    f = line.split()
    kv = dict(t.split("=", 1) for t in f if "=" in t)
    side = "lt" if f[0] == "lt" else "torch_" + kv.get("data", "?")
    runs.setdefault((side, kv["model"], int(kv["batch"])), []).append(float(kv["samples_per_s"]))

def best(side, m, b):
    v = runs.get((side, m, int(b)))
    return (max(v), statistics.median(v)) if v else None

def cell(x):
    return "n/a" if x is None else "%8.0f (%8.0f)" % x

TARGET = {64: 2.0, 1024: 1.0}
names = {"mlp": "MLP 784-512-512-10", "cnn": "CNN conv32-pool-conv64-pool-128-10"}
print()
print("samples/s, best of the rounds (median); lt/torch against PyTorch's faster feed (best / median)")
print("%-5s %6s  %19s  %19s  %19s  %15s  %s" % ("model", "batch", "lt gpu", "torch data=device",
                                              "torch data=host", "lt/torch", "target"))
verdicts = []
for m in models:
    for b in batches:
        b = int(b)
        lt, td, th = best("lt", m, b), best("torch_device", m, b), best("torch_host", m, b)
        ratio = None
        peer = [t for t in (td, th) if t]
        if lt and peer:
            tb = max(p[0] for p in peer)
            tm = max(p[1] for p in peer)
            ratio = (lt[0] / tb, lt[1] / tm)
        need = TARGET.get(b)
        if need is None:
            verdict = "-"
        elif ratio is None:
            verdict = ">= %gx: n/a (%s)" % (need, "lt failed" if not lt else "no PyTorch peer")
        else:
            verdict = ">= %gx: %s" % (need, "met" if ratio[0] >= need else "NOT met")
        rs = "n/a" if ratio is None else "%5.2f (%5.2f)" % ratio
        print("%-5s %6d  %19s  %19s  %19s  %15s  %s" % (m, b, cell(lt), cell(td), cell(th), rs, verdict))
        verdicts.append("gpu_bench model=%s batch=%d lt=%s torch=%s ratio=%s target=%s verdict=%s" % (
            m, b, "%.0f" % lt[0] if lt else "n/a",
            "%.0f" % max(p[0] for p in peer) if peer else "n/a",
            "%.2f" % ratio[0] if ratio else "n/a", "%g" % need if need else "-",
            ("met" if ratio[0] >= need else "NOT_met") if (ratio and need) else "n/a"))
print("(%s; %s)" % (", ".join("%s = %s" % (k, v) for k, v in names.items() if k in models),
                    "torch column empty: no CUDA-enabled PyTorch" if not have_torch else
                    "data=device: the set on the GPU; data=host: gathered on the host, copied each step, as lt"))
print()
for v in verdicts:
    print(v)
EOF
exit $status
