#!/bin/bash
# Issue 12's figures in one go: runs, each as it is and one after the other,
#   1. bench/run_train_bench.sh    1 process, 1 thread: lt vs PyTorch, MLP (and the CNN)
#   2. bench/run_ddp_bench.sh      ddp 2 ranks on this host vs lt 1 process and PyTorch DDP (gloo)
#   3. bench/run_startup_bench.sh  time to the slowest rank's first optimizer step, peak RSS per rank
# with their whole outputs shown as they run and kept in a folder, then prints
# ONE summary table of the figures issue 12 asks for, each beside its target,
# read from what the sub-benches printed (nothing is measured twice).
#
#   bench/run_all.sh [BUILD_DIR]        (default: build; ltrun, plugins and bench/train_bench)
#
# Run time: the sub-benches' own sample sizes, with run_train_bench's batch
# 256 left out (the issue asks for 64 and 1024): on a 2-core AMD EPYC, about
# 3-4 minutes for run_train_bench (MLP ~14 s and CNN ~35 s a round for both
# sides), 2-3 for run_ddp_bench (allreduce part ~5 s), 3 for
# run_startup_bench (PyTorch 2.x's import dominates): 9-12 minutes in all,
# more on a busy machine. Environment (each sets the sub-bench's own knob; a
# REPS, BATCHES or SAMPLES in run_all's environment is not passed through):
#   TRAIN_REPS=3              run_train_bench REPS (its default: 3)
#   TRAIN_BATCHES="64 1024"   run_train_bench BATCHES (its default: "64 256 1024")
#   TRAIN_SAMPLES=110000      run_train_bench SAMPLES, samples per timed run (its default)
#   CNN_BATCHES="64"          run_train_bench CNN_BATCHES; empty skips the CNN (its default)
#   CNN_SAMPLES=20000         run_train_bench CNN_SAMPLES (its default)
#   DDP_REPS=3                run_ddp_bench REPS (its default: 3); BATCHES "64 512" (its default)
#   DDP_ALLREDUCE=1           run_ddp_bench ALLREDUCE (0 skips the allreduce part, not in the summary)
#   STARTUP_REPS=5            run_startup_bench REPS (its default: 5)
#   STARTUP_FIRST=1           run_startup_bench FIRST (0 skips the empty-cache lt runs)
#   RESULTS=                  folder for the three outputs (default: a new /tmp/run_all.XXXXXX, kept)
# TORCH_PY, TORCH2_PY, LT_FASHION_MNIST_DIR and PIN reach the sub-benches
# unchanged. PyTorch 2.x (TORCH2_PY) is only in the start-up bench; the
# throughput peers are TORCH_PY's (Debian's 1.13), as in the sub-benches.
#
# Which figure: each ratio is shown as "median (best)" over the rounds:
# run_train_bench prints both (its own headline is the best), run_ddp_bench
# too (its headline is the median); start-up figures are medians. A verdict
# is "met" when the median meets the target, "best only" when only the best
# round does, else "NOT met". Nothing fails on a figure: the exit status is
# non-zero only when a sub-bench could not run a program.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run_all: no build dir ${1:-$root/build}" >&2; exit 1; }
for f in ltrun bench/train_bench; do
    if [ ! -x "$build/$f" ]; then
        echo "run_all: no $build/$f; build first: cmake -S $root -B $build && cmake --build $build -j2" >&2
        exit 1
    fi
done
TRAIN_REPS=${TRAIN_REPS:-3}
TRAIN_BATCHES=${TRAIN_BATCHES:-"64 1024"}
TRAIN_SAMPLES=${TRAIN_SAMPLES:-110000}
CNN_BATCHES=${CNN_BATCHES-"64"}
CNN_SAMPLES=${CNN_SAMPLES:-20000}
DDP_REPS=${DDP_REPS:-3}
DDP_ALLREDUCE=${DDP_ALLREDUCE:-1}
STARTUP_REPS=${STARTUP_REPS:-5}
STARTUP_FIRST=${STARTUP_FIRST:-1}
RESULTS=${RESULTS:-$(mktemp -d /tmp/run_all.XXXXXX)}
mkdir -p "$RESULTS" || exit 1

status=0
t_all=$SECONDS
declare -A took
# sub NAME SCRIPT VAR=VALUE...: one sub-bench, its output shown and kept.
sub() {
    local name=$1 script=$2; shift 2
    local t=$SECONDS rc
    echo
    echo "======== $name: $* bash bench/$script $build"
    env "$@" bash "$here/$script" "$build" 2>&1 | tee "$RESULTS/$name.txt"
    rc=${PIPESTATUS[0]}
    took[$name]=$((SECONDS - t))
    echo "======== $name: exit $rc, ${took[$name]} s"
    [ "$rc" = 0 ] || status=1
}

echo "# run_all $(date -u +%FT%TZ); build $build; outputs in $RESULTS"
sub train run_train_bench.sh REPS="$TRAIN_REPS" BATCHES="$TRAIN_BATCHES" SAMPLES="$TRAIN_SAMPLES" \
    CNN_BATCHES="$CNN_BATCHES" CNN_SAMPLES="$CNN_SAMPLES"
sub ddp run_ddp_bench.sh REPS="$DDP_REPS" BATCHES="64 512" ALLREDUCE="$DDP_ALLREDUCE"
sub startup run_startup_bench.sh REPS="$STARTUP_REPS" FIRST="$STARTUP_FIRST"
total=$((SECONDS - t_all))

python3 - "$RESULTS" "${took[train]}" "${took[ddp]}" "${took[startup]}" "$total" <<'EOF'
import os, re, sys
res, t_train, t_ddp, t_startup, total = sys.argv[1:6]

def text(name):
    try:
        return open(os.path.join(res, name + ".txt")).read().splitlines()
    except OSError:
        return []

PAIR = r"([0-9.]+) \(([0-9.]+)\)"  # "a (b)"

# run_train_bench: the MLP table's rows are
#   batch  lt best (median)  torch best (median)  lt/torch best (median)  ...
# and the CNN table's rows batch  lt  torch  lt/torch, the same cells.
ROW = re.compile(r"^\s*(\d+)\s+[0-9]+ \(\s*[0-9]+\)\s+[0-9]+ \(\s*[0-9]+\)\s+" + PAIR)
train = {"mlp": {}, "cnn": {}}
section = None
for line in text("train"):
    if line.startswith("MLP 784-512-512-10"):
        section = "mlp"
    elif line.startswith("CNN conv3x3"):
        section = "cnn"
    elif not line.strip():
        section = None
    elif section:
        m = ROW.match(line)
        if m:  # train: best first, median in parentheses
            train[section][int(m.group(1))] = {"best": float(m.group(2)), "median": float(m.group(3))}

# run_train_bench's "GEMM ceiling: batch N: S samples/s if ... , R x torch":
# lt/torch if lt's step were only its GEMMs at the run's best GEMM rate.
gemm_ceiling = {}
for line in text("train"):
    m = re.match(r"^GEMM ceiling: batch (\d+): .*, ([0-9.]+)x torch$", line)
    if m:
        gemm_ceiling[int(m.group(1))] = float(m.group(2))

# run_ddp_bench: after "ratios: median (of bests)", a header naming each
# column ("lt ddp / lt 1 rank", ...) and one row per batch of
# "median (best)" cells or n/a.
ddp = {}
lines = text("ddp")
for i, line in enumerate(lines):
    if line.startswith("ratios: median"):
        names = [c.strip() for c in re.split(r"\s{2,}", lines[i + 1].strip())[1:]]
        for row in lines[i + 2:]:
            m = re.match(r"^\s*(\d+)\s+(.*)$", row)
            if not m:
                break
            cells = re.findall(PAIR + r"|(n/a)", m.group(2))
            for name, c in zip(names, cells):
                if c[0]:
                    ddp[(name, int(m.group(1)))] = {"median": float(c[0]), "best": float(c[1])}
        break

# run_startup_bench: "startup run=NAME ranks=N first_step_s=... rss_mb=... version=..."
startup = {}
for line in text("startup"):
    if line.startswith("startup "):
        kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
        startup[(kv["run"], int(kv["ranks"]))] = kv

rows = []

def ratio_row(what, fig, need):
    if not fig:
        rows.append((what, "n/a (not measured)", ">= %gx" % need if need else "-", "n/a" if need else ""))
        return
    meas = "%.2fx (best %.2fx)" % (fig["median"], fig["best"])
    if not need:
        verdict = ""
    elif fig["median"] >= need:
        verdict = "met"
    elif fig["best"] >= need:
        verdict = "best only"
    else:
        verdict = "NOT met"
    rows.append((what, meas, ">= %gx" % need if need else "-", verdict))

def startup_row(what, run, n, key, unit, need, fmt):
    kv = startup.get((run, n))
    if not kv:
        rows.append((what, "n/a (not measured)", "<= %g %s" % (need, unit) if need else "-", "n/a" if need else ""))
        return
    x = float(kv[key])
    verdict = "" if need is None else ("met" if x <= need else "NOT met")
    rows.append((what, (fmt % x) + " " + unit, "<= %g %s" % (need, unit) if need is not None else "-", verdict))

for b, need in ((64, 1.6), (1024, 1.1)):
    ratio_row("1 process, 1 thread, MLP: lt / PyTorch, batch %d" % b, train["mlp"].get(b), need)
    if b in gemm_ceiling:
        rows.append(("  ceiling: a step of only its GEMMs at this run's best GEMM rate / PyTorch",
                     "%.2fx" % gemm_ceiling[b], "-", ""))
for b in sorted(train["cnn"]):
    ratio_row("1 process, 1 thread, CNN: lt / PyTorch, batch %d" % b, train["cnn"][b], None)
def variants(ref, b):
    # run_ddp_bench's other lt ddp configurations, for context (no target)
    cells = []
    for v, what in (("overlap", "overlap on"), ("no-overlap", "overlap off"), ("own-mem", "own memory"),
                    ("gloo", "gloo backend")):
        f = ddp.get(("lt ddp %s / %s" % (v, ref), b))
        cells.append("%s %s" % (what, "n/a" if not f else "%.2fx" % f["median"]))
    rows.append(("  same ratio, other lt ddp settings (median)", ", ".join(cells), "-", ""))

for b, ref, need, what in ((64, "lt 1 rank", 1.8, "lt 1 process"), (512, "lt 1 rank", 1.85, "lt 1 process"),
                           (64, "torch DDP", 2.5, "PyTorch DDP gloo")):
    ratio_row("ddp 2 ranks, 1 host: lt ddp / %s, batch %d" % (what, b),
              ddp.get(("lt ddp / %s" % ref, b)), need)
    variants(ref, b)
    if ref == "lt 1 rank":
        # the machine's own ceiling: two one-core processes that never communicate
        ratio_row("  ceiling: 2 lt processes at once, no communication / lt 1 process, batch %d" % b,
                  ddp.get(("lt 2 alone / lt 1 rank", b)), None)
startup_row("first step, 1 process (lt, warm data cache)", "lt_warm", 1, "first_step_s", "s", 0.15, "%.3f")
startup_row("first step, ddp 2 ranks (lt, warm data cache)", "lt_warm", 2, "first_step_s", "s", 0.15, "%.3f")
startup_row("peak RSS per rank, 1 process (lt, warm cache)", "lt_warm", 1, "rss_mb", "MB", 50, "%.1f")
startup_row("peak RSS per rank, ddp 2 ranks (lt, warm cache)", "lt_warm", 2, "rss_mb", "MB", 50, "%.1f")
# Context, no targets: lt without its data cache (data.cache_dir=none), lt's
# first run on a host (empty cache), and the PyTorch peers with peer / lt warm.
def context(label, run, n):
    kv = startup.get((run, n))
    if not kv:
        return
    t, m = float(kv["first_step_s"]), float(kv["rss_mb"])
    meas = "%.3f s / %.0f MB" % (t, m)
    lt = startup.get(("lt_warm", n))
    if run.startswith("torch") and lt and float(lt["first_step_s"]) > 0 and float(lt["rss_mb"]) > 0:
        meas += "  (%.0fx / %.0fx lt)" % (t / float(lt["first_step_s"]), m / float(lt["rss_mb"]))
    rows.append(("  %s, %d rank%s: first step / RSS per rank" % (label, n, "s" if n > 1 else ""), meas, "-", ""))

for n in (1, 2):
    context("lt, no data cache", "lt_cold", n)
    context("lt, first run (empty cache)", "lt_first", n)
    for peer in ("torch1", "torch2"):
        kv = startup.get((peer, n))
        if kv:
            context("PyTorch %s" % kv["version"], peer, n)

w = max(len(r[0]) for r in rows)
print()
print("=" * 100)
print("issue 12 summary  (outputs: %s)" % res)
print("ratios: median (best) of the rounds; start-up: median; ddp = lt's default ddp (process_group_backend auto: shm on one host; overlap auto)")
print("%-*s  %-36s  %-10s  %s" % (w, "figure", "measured", "target", "verdict"))
for r in rows:
    print("%-*s  %-36s  %-10s  %s" % (w, r[0], r[1], r[2], r[3]))
print("time: run_train_bench %s s, run_ddp_bench %s s, run_startup_bench %s s; all %s s" % (
    t_train, t_ddp, t_startup, total))
EOF
exit $status
