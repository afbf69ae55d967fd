#!/bin/bash
# Everything lt checks on a GPU, in one command and one go (a lent GPU
# machine runs one command of at most 10 minutes; this is meant to take 5-7
# on one H100 with 16 cores, and stops starting steps after
# LT_GPU_DEADLINE_S):
#
#   bash tests/gpu/run.sh                 build, unit tests, integration tests, bench
#   bash tests/gpu/run.sh --build-only    dependencies and the build only
#   bash tests/gpu/run.sh --no-bench      all but the bench
#
# From the repository root or anywhere; with the device tool: command
# "bash tests/gpu/run.sh", carry [".debs"] when that machine lacks lt's
# Debian packages (bash tests/gpu/pack_debs.sh fills .debs/ here first:
# ../shared/offline/pack.sh's packages, jansson, pkg-config and SIMDe,
# unpack.sh).
#
# Steps, each reported ok / FAILED / skipped (with why) as it ends:
#  1. dependencies: what lt builds against, found on the machine or, when
#     something is missing, unpacked from .debs/ (its unpack.sh, else
#     ../shared/offline/unpack.sh) into /opt/debroot; nvcc and NCCL located
#     (NCCL also from the pip package nvidia-nccl-cu* when the toolkit has
#     none); the data set from LT_FASHION_MNIST_DIR, .debs/fashion-mnist or
#     /usr/share/datasets/fashion-mnist
#  2. build: cmake -DLT_WITH_CUDA=ON -DLT_WITH_NCCL=ON into build-gpu
#     (LT_GPU_BUILD_DIR overrides), then checks that the gpu accelerator, the
#     nccl backend and the GPU unit tests exist
#  3. the machine: nvidia-smi -L, driver, CUDA toolkit. No GPU here: says so
#     and exits 77 (skipped) right after the build check.
#  4. GPU unit tests through ctest: test_gpu_plugin, test_nccl,
#     test_kernel_ops_gpu. Each must PASS; a skip on a GPU machine is a
#     failure here (it proved nothing).
#  5. GPU integration tests, tests/gpu/gpu_*.sh (each says what it checks):
#     gpu_single (a), gpu_dp (b), gpu_ddp_gloo (c), gpu_nccl1 (d),
#     gpu_nccl2 (e; may skip only with fewer than 2 GPUs), gpu_kill (f); then
#     examples/fashion_mnist/gpu.ini trained unchanged for 50 steps.
#  6. the host CPU: the cpu accelerator's kernel tests (every variant the
#     CPU runs: AVX-512, and AVX-512 BF16's native bf16 GEMM, which no other
#     machine of this project has run)
#  7. bench/run_gpu_bench.sh: lt vs PyTorch eager on this GPU; figures only
#     (a figure under its target is reported, not failed; a bench that cannot
#     run fails)
#  8. the host CPU's figures (step 6's), last: the GPU's come first
# The summary (each step's status, the figures) goes to stdout and, when $OUT
# is set (the device tool brings $OUT back), to $OUT/gpu_summary.txt, with all
# logs in $OUT/gpu_logs.tar.gz; both are rewritten after every step, so a run
# cut short still returns what it did. Exit: 0 all ok, 77 no GPU here (after
# the build check), 1 anything failed or not run.
# Environment: LT_GPU_BUILD_DIR, LT_GPU_DEADLINE_S (default 560: steps that
# would start later are reported "not run" rather than cut off), JOBS, TORCH_PY
# and the bench's REPS/SAMPLES (bench/run_gpu_bench.sh).
set -u
T0=$SECONDS
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BUILD_ONLY=0 BENCH=1
for a in "$@"; do
    case $a in
        --build-only) BUILD_ONLY=1 ;;
        --no-bench) BENCH=0 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument '$a' (--build-only, --no-bench, --help)" >&2; exit 2 ;;
    esac
done
BUILD=${LT_GPU_BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
DEADLINE=${LT_GPU_DEADLINE_S:-560}
LOGS=$BUILD/gpu-logs
mkdir -p "$LOGS" || { echo "run.sh: cannot create $LOGS" >&2; exit 1; }
rm -f "$LOGS"/*.log

# ---- the summary, rewritten after every step --------------------------------
RESULTS=()   # "name|status|detail"
FIGURES=()
MACHINE=()
record() { # record NAME STATUS DETAIL
    RESULTS+=("$1|$2|$3")
    printf '==> %-22s %-8s %s\n' "$1" "$2" "$3"
    write_summary
}
summary_text() {
    local r name st detail nfail=0 nskip=0
    echo "lt GPU run: $(date -u +%FT%TZ), $((SECONDS - T0)) s so far, build $BUILD"
    local m; for m in "${MACHINE[@]}"; do echo "  $m"; done
    echo
    for r in "${RESULTS[@]}"; do
        IFS='|' read -r name st detail <<<"$r"
        printf '%-22s %-8s %s\n' "$name" "$st" "$detail"
        case $st in ok) ;; skipped) nskip=$((nskip + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
    done
    if [ ${#FIGURES[@]} -gt 0 ]; then
        echo
        echo "figures (bench/run_gpu_bench.sh; samples/s, best of its rounds; ratio against PyTorch eager's faster feed):"
        local f; for f in "${FIGURES[@]}"; do echo "  $f"; done
    fi
    echo
    echo "checks: $(( ${#RESULTS[@]} - nfail - nskip )) ok, $nfail failed or not run, $nskip skipped"
}
write_summary() {
    summary_text >"$LOGS/gpu_summary.txt"
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" 2>/dev/null
        cp "$LOGS/gpu_summary.txt" "$OUT/gpu_summary.txt" 2>/dev/null
        tar -czf "$OUT/gpu_logs.tar.gz" -C "$BUILD" gpu-logs 2>/dev/null
    fi
}
finish() { # finish EXIT_STATUS
    echo
    echo "================ summary ================"
    summary_text
    [ -n "${OUT:-}" ] && echo "(written to $OUT/gpu_summary.txt; logs in $OUT/gpu_logs.tar.gz)"
    exit "$1"
}
failed_any() {
    local r st
    for r in "${RESULTS[@]}"; do
        st=$(cut -d'|' -f2 <<<"$r")
        case $st in ok|skipped) ;; *) return 0 ;; esac
    done
    return 1
}
left() { echo $((DEADLINE - (SECONDS - T0))); }
# time_for NAME SECONDS: true when SECONDS still fit before the deadline;
# otherwise records NAME as not run.
time_for() {
    if [ "$(left)" -ge "$2" ]; then return 0; fi
    record "$1" "not run" "out of time: $((SECONDS - T0)) s used, deadline $DEADLINE s (LT_GPU_DEADLINE_S)"
    return 1
}
step() { echo; echo "---- $* ($((SECONDS - T0)) s)"; }

# ---- 1. dependencies -----------------------------------------------------------
step "dependencies"
missing_deps() { # prints what lt cannot build without, space-separated
    local miss=() m d found
    command -v cmake >/dev/null 2>&1 || miss+=(cmake)
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || miss+=(a-C-compiler)
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || miss+=(a-C++-compiler)
    if command -v pkg-config >/dev/null 2>&1; then
        for m in inih jansson openblas cunit zlib; do pkg-config --exists "$m" 2>/dev/null || miss+=("$m(pkg-config)"); done
    else
        miss+=(pkg-config)
    fi
    found=0
    for d in /usr/include /usr/local/include $(tr ':' ' ' <<<"${CPATH:-}"); do
        [ -e "$d/gloo/allreduce.h" ] && found=1
    done
    [ $found = 1 ] || miss+=(gloo-headers)
    found=0
    for d in /usr/include /usr/local/include $(tr ':' ' ' <<<"${CPATH:-}"); do
        [ -e "$d/simde/x86/avx512/dpbf16.h" ] && found=1
    done
    [ $found = 1 ] || miss+=(simde-headers)
    echo "${miss[*]}"
}
find_unpack() {
    local u
    for u in "$ROOT/.debs/unpack.sh" "$ROOT/../shared/offline/unpack.sh" "$ROOT/shared/offline/unpack.sh"; do
        [ -r "$u" ] && { echo "$u"; return 0; }
    done
    return 1
}
MISSING=$(missing_deps)
DEPS_HOW="the machine's own packages"
if [ -n "$MISSING" ]; then
    echo "missing here: $MISSING"
    if ls "$ROOT"/.debs/*.deb >/dev/null 2>&1 && UNPACK=$(find_unpack); then
        echo "unpacking $ROOT/.debs with $UNPACK"
        if ENV_LINES=$(bash "$UNPACK" 2>"$LOGS/unpack.log"); then
            eval "$ENV_LINES"
            DEBROOT=${CMAKE_PREFIX_PATH%%:*}
            export PATH="$DEBROOT/bin:$PATH"   # pkgconf, when it was packed
            DEPS_HOW="unpacked from .debs into ${DEBROOT%/usr}"
        else
            echo "unpack failed:"; tail -n 5 "$LOGS/unpack.log"
        fi
        MISSING=$(missing_deps)
    elif ! ls "$ROOT"/.debs/*.deb >/dev/null 2>&1; then
        echo "no .debs/*.deb to unpack (fill it where apt works: bash ../shared/offline/pack.sh; carry .debs)"
    else
        echo "no unpack.sh for .debs (cp ../shared/offline/unpack.sh .debs/ before carrying it)"
    fi
fi
if [ -z "${LT_FASHION_MNIST_DIR:-}" ]; then
    if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
        export LT_FASHION_MNIST_DIR=/usr/share/datasets/fashion-mnist
    elif [ -e "$ROOT/.debs/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
        export LT_FASHION_MNIST_DIR=$ROOT/.debs/fashion-mnist
    fi
fi
# nvcc: on PATH, or the toolkit's usual place
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
command -v nvcc >/dev/null 2>&1 || MISSING="$MISSING nvcc(CUDA-toolkit)"
# NCCL: the toolkit's, the system's, or the pip package PyTorch brings.
NCCL_ARGS=()
NCCL_WHERE=
for f in /usr/local/cuda/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so; do
    [ -e "$f" ] && { NCCL_WHERE=$f; break; }
done
if [ -z "$NCCL_WHERE" ]; then
    NCCL_WHERE=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so[ .]/ { print $NF; exit }')
fi
if [ -z "$NCCL_WHERE" ]; then
    PIPNCCL=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
    if [ -n "$PIPNCCL" ] && [ -e "$PIPNCCL/lib/libnccl.so.2" ] && [ -e "$PIPNCCL/include/nccl.h" ]; then
        # An NCCL_HOME of links: lib/libnccl.so for the linker (the wheel has
        # only libnccl.so.2), lib/libnccl.so.2 for the loader, include/nccl.h.
        nh=$BUILD/nccl-home
        mkdir -p "$nh/lib" && ln -sfn "$PIPNCCL/include" "$nh/include" &&
            ln -sf "$PIPNCCL/lib/libnccl.so.2" "$nh/lib/libnccl.so" &&
            ln -sf "$PIPNCCL/lib/libnccl.so.2" "$nh/lib/libnccl.so.2"
        NCCL_WHERE="$PIPNCCL/lib/libnccl.so.2 (pip package, linked from $nh)"
        export NCCL_HOME=$nh
        # the root's check (NCCL_LIBRARY) and the plugin's (LT_NCCL_*)
        NCCL_ARGS=(-DNCCL_LIBRARY="$nh/lib/libnccl.so" -DLT_NCCL_LIB="$nh/lib/libnccl.so"
                   -DLT_NCCL_INCLUDE_DIR="$nh/include")
        export LD_LIBRARY_PATH="$nh/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
fi
[ -n "$NCCL_WHERE" ] || MISSING="$MISSING libnccl"
MISSING=$(echo $MISSING)
if [ -n "$MISSING" ]; then
    record dependencies FAILED "missing: $MISSING (pack them on a machine with apt: bash ../shared/offline/pack.sh, LT_EXTRA_DEBS for more; carry .debs)"
    finish 1
fi
DATA_NOTE=${LT_FASHION_MNIST_DIR:-none found}
record dependencies ok "$DEPS_HOW; nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'); NCCL $NCCL_WHERE; data $DATA_NOTE"

# ---- 2. build --------------------------------------------------------------------
step "build: $BUILD (-DLT_WITH_CUDA=ON -DLT_WITH_NCCL=ON, -j$JOBS)"
t=$SECONDS
if cmake -S "$ROOT" -B "$BUILD" -DLT_WITH_CUDA=ON -DLT_WITH_NCCL=ON "${NCCL_ARGS[@]}" >"$LOGS/configure.log" 2>&1 &&
   cmake --build "$BUILD" -j "$JOBS" >"$LOGS/build.log" 2>&1; then
    grep -h '^-- lt: ' "$LOGS/configure.log" | sed 's/^/  /'
    built=() absent=()
    for f in plugins/liblt-accelerator-gpu.so plugins/liblt-backend-nccl.so ltrun bench/train_bench \
             tests/integration/ckpt_compare tests/integration/tcp_port; do
        if [ -e "$BUILD/$f" ]; then built+=("$(basename "$f")"); else absent+=("$f"); fi
    done
    ctest --test-dir "$BUILD" -N >"$LOGS/ctest-list.log" 2>&1
    for tname in test_gpu_plugin test_nccl test_kernel_ops_gpu; do
        grep -qE "Test +#[0-9]+: $tname\$" "$LOGS/ctest-list.log" || absent+=("ctest:$tname")
    done
    if [ ${#absent[@]} -eq 0 ]; then
        record build ok "$((SECONDS - t)) s; gpu accelerator, nccl backend and the 3 GPU unit tests built"
    else
        record build FAILED "$((SECONDS - t)) s; the build ran but these are missing: ${absent[*]}"
    fi
else
    echo "  the build failed; last lines (all in $LOGS/configure.log, build.log):"
    tail -n 25 "$LOGS/configure.log" "$LOGS/build.log" 2>/dev/null | grep -v '^$' | tail -n 25 | sed 's/^/    /'
    record build FAILED "$((SECONDS - t)) s; cmake $( [ -s "$LOGS/build.log" ] && echo --build || echo configure) failed: $(grep -h -m1 -E 'error:|CMake Error|Error [0-9]+' "$LOGS/configure.log" "$LOGS/build.log" 2>/dev/null | head -n 1 | cut -c1-200)"
fi

# ---- 3. the machine ------------------------------------------------------------------
step "the machine"
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    nvidia-smi -L 2>&1 | sed 's/^/  /'
    MACHINE+=("$(nvidia-smi -L 2>/dev/null | head -n 4 | tr '\n' ';' | sed 's/;$//')")
    drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null | head -n 1)
    MACHINE+=("driver ${drv:-unknown}; $NGPU GPU(s)")
else
    MACHINE+=("no nvidia-smi: no NVIDIA driver on this machine")
fi
MACHINE+=("CUDA toolkit: $(nvcc --version | grep -m1 release | sed 's/.*release /release /')")
MACHINE+=("host: $(uname -n), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1); $(cmake --version | head -n 1); $(cc --version | head -n 1)")
MACHINE+=("source: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git')$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo ' + local changes')")
for m in "${MACHINE[@]}"; do echo "  $m"; done
write_summary
if [ "$NGPU" -eq 0 ]; then
    echo
    echo "no GPU on this machine ($(command -v nvidia-smi >/dev/null 2>&1 && echo 'nvidia-smi -L lists none' || echo 'no nvidia-smi')): the build check is all that can run here"
    if failed_any; then finish 1; fi
    record "GPU tests" skipped "no GPU on this machine"
    finish 77
fi
if failed_any; then finish 1; fi
if [ $BUILD_ONLY = 1 ]; then finish 0; fi

# ---- 4. GPU unit tests -------------------------------------------------------------
step "GPU unit tests (ctest -R test_gpu_plugin|test_nccl|test_kernel_ops_gpu)"
if time_for "unit tests" 60; then
    # The tests' own TIMEOUT (600 s) outlasts a lent machine's command:
    # bound the three together (a test cut off shows as "no result").
    lim=$(( $(left) > 300 ? 300 : $(left) ))
    timeout -k 10 "$lim" ctest --test-dir "$BUILD" -R '^(test_gpu_plugin|test_nccl|test_kernel_ops_gpu)$' -V \
        >"$LOGS/unit.log" 2>&1
    [ $? -ge 124 ] && echo "  ctest was stopped after $lim s"
    for tname in test_gpu_plugin test_nccl test_kernel_ops_gpu; do
        line=$(grep -E "Test +#[0-9]+: $tname \.+" "$LOGS/unit.log" | tail -n 1)
        num=$(sed -nE 's/.*Test +#([0-9]+):.*/\1/p' <<<"$line")
        secs=$(grep -oE '[0-9.]+ sec' <<<"$line")
        echo "  ${line:-$tname: no result}"
        if grep -q ' Passed ' <<<"$line"; then
            record "$tname" ok "passed, $secs"
            continue
        fi
        [ -n "$num" ] && grep -E "^$num: " "$LOGS/unit.log" | tail -n 15 | sed 's/^/    /'
        why=$( [ -n "$num" ] && grep -E "^$num: " "$LOGS/unit.log" | grep -iE 'skip|fail|error' | tail -n 1 | cut -c1-160)
        if grep -q 'Skipped' <<<"$line"; then
            record "$tname" FAILED "SKIPPED on a GPU machine (it must pass here): ${why:-no reason printed}"
        elif [ -z "$line" ]; then
            record "$tname" FAILED "no result from ctest (not run, or cut off at $lim s; see unit.log)"
        else
            record "$tname" FAILED "$(sed -nE 's/.*\*\*\*([A-Za-z ]+).*/\1/p' <<<"$line" | head -n 1) ${secs}: ${why}"
        fi
    done
fi

# ---- 5. GPU integration tests ------------------------------------------------------------
ARGS=("$BUILD/ltrun" "$BUILD/plugins" "$ROOT" "$BUILD/tests/integration" "$BUILD/test-integration-plugins")
for t in gpu_single gpu_dp gpu_ddp_gloo gpu_nccl1 gpu_nccl2 gpu_kill; do
    step "integration: tests/gpu/$t.sh"
    time_for "$t" 30 || continue
    lim=$(( $(left) > 240 ? 240 : $(left) ))
    t1=$SECONDS
    timeout -k 10 "$lim" bash "$ROOT/tests/gpu/$t.sh" "${ARGS[@]}" 2>&1 | tee "$LOGS/$t.log"
    rc=${PIPESTATUS[0]}
    secs=$((SECONDS - t1))
    nok=$(grep -c '^  ok: ' "$LOGS/$t.log")
    fails=$(grep '^  FAILED: ' "$LOGS/$t.log" | head -n 3 | sed 's/^  FAILED: //' | tr '\n' ';' | cut -c1-300)
    notrun=$(grep -c '^  not run: ' "$LOGS/$t.log")
    extra=; [ "$notrun" -gt 0 ] && extra=" ($notrun case(s) not run, see log)"
    case $rc in
        0) record "$t" ok "$nok checks, ${secs} s$extra" ;;
        77)
            why=$(grep -m1 ': skipped: ' "$LOGS/$t.log" | sed 's/.*: skipped: //' | cut -c1-240)
            # Only a test that needs 2 GPUs may skip, and only for that reason.
            if [ "$NGPU" -lt 2 ] && grep -q '^needs 2 GPUs' <<<"$why"; then
                record "$t" skipped "$why"
            else
                record "$t" FAILED "skipped on a GPU machine: $why"
            fi ;;
        124|137) record "$t" FAILED "timed out after ${lim} s ($nok checks ok before)" ;;
        *) record "$t" FAILED "exit $rc, ${secs} s; $nok ok; failed: ${fails:-see log}" ;;
    esac
done

step "example: examples/fashion_mnist/gpu.ini unchanged (50 steps)"
if time_for "example gpu.ini" 20; then
    ex=$(mktemp -d /tmp/lt-gpu-ini.XXXXXX)
    timeout -k 5 120 "$BUILD/ltrun" --config "$ROOT/examples/fashion_mnist/gpu.ini" --plugin-dir "$BUILD/plugins" \
        ${LT_FASHION_MNIST_DIR:+--data-dir "$LT_FASHION_MNIST_DIR"} --max-steps 50 --max-epochs 1 --no-test \
        --set trainer.limit_val_batches=5 --set trainer.enable_progress_bar=false --default-root-dir "$ex" \
        >"$LOGS/gpu_ini.log" 2>&1
    rc=$?
    sed 's/^/  /' "$LOGS/gpu_ini.log" | tail -n 8
    if [ $rc -eq 0 ] && grep -q '^lt: accelerator gpu' "$LOGS/gpu_ini.log" && [ -s "$ex/checkpoints/last.safetensors" ]; then
        record "example gpu.ini" ok "$(grep -m1 '^epoch 0 done' "$LOGS/gpu_ini.log" | cut -c1-100)"
    else
        record "example gpu.ini" FAILED "exit $rc; $(grep -m1 -E 'error|^lt: accelerator' "$LOGS/gpu_ini.log" | cut -c1-200)"
    fi
    rm -rf "$ex"
fi

# ---- 6. the host CPU ---------------------------------------------------------------------------
# A lent GPU machine's CPU is often of a kind this project's own machines are
# not (AVX-512, AVX-512 BF16, AMX). The cpu accelerator's kernel tests run
# every variant the CPU can execute, the native vdpbf16ps GEMM among them
# (issue 10; never run elsewhere). Step 8's figures show the bf16 GEMM paths
# and the MLP under isa=avx2 and isa=avx512 on this CPU (issue 12).
step "host CPU: the cpu accelerator's kernel tests and figures"
want='avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_bf16|amx_bf16|amx_tile'
cflags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE "$want" | tr '\n' ' ')
MACHINE+=("host CPU flags lt's kernels ask about: ${cflags:-none}")
if time_for "cpu kernels" 60; then
    lim=$(( $(left) > 150 ? 150 : $(left) ))
    timeout -k 10 "$lim" ctest --test-dir "$BUILD" -j "$JOBS" -V \
        -R '^(test_cpu_gemm|test_cpu_kernels|test_cpu_kernels_lowp|test_cpu_lowp|test_kernel_ops)$' \
        >"$LOGS/cpu.log" 2>&1
    rc=$?
    skips=$(grep -c 'SKIPPED' "$LOGS/cpu.log")
    tail -n 12 "$LOGS/cpu.log" | sed 's/^/  /'
    if [ $rc -eq 0 ]; then
        record "cpu kernels" ok "5 tests passed; $skips variant(s) this CPU cannot run skipped (cpu.log)"
    else
        record "cpu kernels" FAILED "ctest exit $rc: $(grep -E 'Failed|\*\*\*' "$LOGS/cpu.log" | head -n 3 | tr '\n' ';' | cut -c1-240)"
    fi
fi

# ---- 7. bench --------------------------------------------------------------------------------
if [ $BENCH = 1 ]; then
    step "bench: bench/run_gpu_bench.sh"
    if time_for bench 60; then
        lim=$(( $(left) - 5 ))
        t1=$SECONDS
        timeout -k 10 "$lim" bash "$ROOT/bench/run_gpu_bench.sh" "$BUILD" 2>&1 | tee "$LOGS/bench.log"
        rc=${PIPESTATUS[0]}
        while read -r line; do
            set -- $line
            declare -A kv=()
            for w in "$@"; do [[ $w == *=* ]] && kv[${w%%=*}]=${w#*=}; done
            FIGURES+=("$(printf '%-4s batch %5s: lt %9s/s  torch %9s/s  lt/torch %5s  (target >= %sx: %s)' \
                "${kv[model]}" "${kv[batch]}" "${kv[lt]}" "${kv[torch]}" "${kv[ratio]}" "${kv[target]}" "${kv[verdict]//_/ }")")
            unset kv
        done < <(grep '^gpu_bench ' "$LOGS/bench.log")
        peer=$(grep -m1 '^# torch' "$LOGS/bench.log" | cut -c3-160)
        case $rc in
            0) record bench ok "$((SECONDS - t1)) s; ${peer:-no torch line}" ;;
            124|137) record bench FAILED "timed out after $lim s" ;;
            *) record bench FAILED "exit $rc ($((SECONDS - t1)) s): a program could not run (see bench.log)" ;;
        esac
    fi
fi

# ---- 8. the host CPU's figures (after the GPU's, which come first) --------------------------
# Figures only: out of time they are skipped, not a failure of the run.
if [ $BENCH = 1 ] && [ "$(left)" -lt 60 ]; then
    record "cpu figures" skipped "out of time after the GPU bench ($((SECONDS - T0)) s used)"
elif [ $BENCH = 1 ]; then
    bf=widen; grep -qw avx512_bf16 <<<"$cflags" && bf=native
    timeout -k 5 60 "$BUILD/bench/lowp_gemm_bench" --secs 0.1 --bf16-gemm "$bf" >"$LOGS/cpu_gemm.log" 2>&1
    FIGURES+=("cpu: lowp_gemm_bench --bf16-gemm $bf: exit $?, per-shape f32/bf16 GF/s in cpu_gemm.log")
    for isa in avx2 avx512; do
        for b in 64 1024; do
            line=$(timeout -k 5 60 "$BUILD/bench/train_bench" --batch "$b" --samples 20000 --gemm-secs 0 \
                --set accelerator.isa=$isa 2>&1 | tee -a "$LOGS/cpu_train.log" | grep -E 'samples/s' | tail -n 1)
            FIGURES+=("cpu: MLP isa=$isa batch $b: ${line:-refused or failed (cpu_train.log)}")
        done
    done
    write_summary
fi

if failed_any; then finish 1; fi
finish 0
