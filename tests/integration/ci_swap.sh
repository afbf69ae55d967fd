#!/bin/bash
# The CI swap: a config written for a GPU machine (examples/fashion_mnist/
# gpu.ini: accelerator = gpu, [strategy] process_group_backend = nccl) runs on
# a CPU-only CI machine when two settings are overridden on the command line,
#     --accelerator cpu --set strategy.process_group_backend=gloo
# and then trains exactly what the plain CPU config (train.ini, which differs
# only in those settings and its run folder) trains. Checks:
#   1. one process: gpu.ini swapped == train.ini on the cpu, bit for bit
#      (20 steps; the same code runs, so the parameters must be identical)
#   2. ddp on 2 processes, where the backend matters: gpu.ini swapped (gloo)
#      == train.ini with the same backend, bit for bit; and (without a usable
#      GPU) swapping the accelerator alone is refused, exit 2, naming nccl
#   3. gpu.ini unchanged: on a machine without a usable GPU ltrun refuses it
#      with exit status 2 and ONE error line that names the gpu (either the
#      gpu plugin's "no usable device" reason or, where the gpu plugin is not
#      built, the loader's "accelerator 'gpu' not found"), before training;
#      on a machine whose GPU works it trains (exit 0)
#   4. gpu.ini with --accelerator auto: picks cpu here (the "lt: accelerator
#      cpu" summary line) and again equals train.ini bit for bit; where a
#      usable GPU exists, auto must pick it instead
source "$(dirname "$0")/common.sh"
it_init ci_swap "$@"
GPU_INI=$SRC/examples/fashion_mnist/gpu.ini
CPU_INI=$SRC/examples/fashion_mnist/train.ini
[ -r "$GPU_INI" ] || { echo "ci_swap: FAIL: $GPU_INI is missing"; exit 1; }
SWAP=(--accelerator cpu --set strategy.process_group_backend=gloo)
# Short runs; everything else comes from the config files themselves.
QUICK=(--plugin-dir "$PLUGINS" --set "data.dir=$DATA" --max-steps 20 --max-epochs 1
       --set trainer.limit_val_batches=5 --set trainer.num_sanity_val_steps=0 --no-test
       --set trainer.enable_progress_bar=false --set launcher.rdzv_timeout_s=60
       --set strategy.timeout_s=60)

# Is there a GPU this build can use? Only then may gpu.ini run unchanged.
GPU_USABLE=0
if [ -e "$PLUGINS/liblt-accelerator-gpu.so" ] && command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    GPU_USABLE=1
fi
if [ $GPU_USABLE = 1 ]; then
    echo "ci_swap: this machine has a GPU and the gpu plugin is built: case 3 expects gpu.ini to train, case 4 expects auto to pick gpu"
else
    echo "ci_swap: no usable GPU here (gpu plugin $( [ -e "$PLUGINS/liblt-accelerator-gpu.so" ] && echo built || echo 'not built'), nvidia-smi $(command -v nvidia-smi >/dev/null 2>&1 && echo 'lists no GPU' || echo absent))"
fi

run_cfg() { # run_cfg LABEL INI args... -> RC, checkpoint $(ckpt_of LABEL)
    local label=$1 ini=$2; shift 2
    run_ltrun "$label" --config "$ini" "${QUICK[@]}" --default-root-dir "$IT_TMP/$label" "$@"
}
trained() { # trained LABEL: exit 0, a checkpoint, an epoch line
    check "$1: ltrun exits 0 ($RC)" [ "$RC" -eq 0 ]
    check "$1: wrote checkpoints/last.safetensors" [ -s "$(ckpt_of "$1")" ]
    check "$1: trained 20 steps (epoch 0 done: step 20)" contains "$IT_TMP/$1.out" "epoch 0 done: step 20,"
}
summary_of() { grep -m1 '^lt: accelerator' "$IT_TMP/$1.out" | sed 's/^/    /'; }

echo "ci_swap: case 1: gpu.ini + --accelerator cpu --set strategy.process_group_backend=gloo vs train.ini on the cpu, 20 steps"
run_cfg swapped "$GPU_INI" "${SWAP[@]}"
trained swapped
summary_of swapped
check "swapped: ran on the cpu accelerator" contains "$IT_TMP/swapped.out" "^lt: accelerator cpu (1 device)"
run_cfg plain "$CPU_INI" --accelerator cpu
trained plain
cmp_with swapped plain 0 max

echo "ci_swap: case 2: the same with --devices 2 (ddp, the backend in use): gloo instead of nccl"
run_cfg swapped2 "$GPU_INI" "${SWAP[@]}" --devices 2
trained swapped2
summary_of swapped2
check "swapped2: 2 ranks of ddp over gloo on the cpu" \
    contains "$IT_TMP/swapped2.out" "^lt: accelerator cpu (2 devices), strategy ddp, .*backend gloo"
run_cfg plain2 "$CPU_INI" --accelerator cpu --devices 2 --set strategy.process_group_backend=gloo
trained plain2
cmp_with swapped2 plain2 0 max
if [ $GPU_USABLE = 0 ]; then
    echo "ci_swap: case 2b: why the backend is swapped too: --accelerator cpu alone, --devices 2, keeps nccl"
    run_cfg halfswap "$GPU_INI" --accelerator cpu --devices 2
    line=$(grep -m1 'error:' "$IT_TMP/halfswap.err")
    echo "    stderr: ${line:-(no error line)}"
    check "halfswap: refused with exit status 2 ($RC)" [ "$RC" -eq 2 ]
    check "halfswap: the error line names nccl" bash -c "grep -qi 'nccl' <<<\"\$1\"" _ "$line"
fi

echo "ci_swap: case 3: gpu.ini unchanged"
run_cfg unchanged "$GPU_INI"
if [ $GPU_USABLE = 1 ]; then
    trained unchanged
    check "unchanged: ran on the gpu accelerator" contains "$IT_TMP/unchanged.out" "^lt: accelerator gpu"
else
    errs=$(grep -c . "$IT_TMP/unchanged.err")
    line=$(grep -m1 . "$IT_TMP/unchanged.err")
    echo "    stderr: $line"
    check "unchanged: refused with exit status 2 ($RC)" [ "$RC" -eq 2 ]
    check "unchanged: exactly one line on stderr ($errs)" [ "$errs" -eq 1 ]
    check "unchanged: it is an error line that names the gpu accelerator" \
        bash -c "grep -qi 'error:' <<<\"\$1\" && grep -qi 'gpu' <<<\"\$1\"" _ "$line"
    check "unchanged: it says why (no usable device, or the gpu plugin is not found)" \
        bash -c "grep -qiE 'no usable device|not found' <<<\"\$1\"" _ "$line"
    check "unchanged: nothing was trained (no epoch line, no checkpoint)" \
        bash -c "! grep -q '^epoch ' '$IT_TMP/unchanged.out' && [ ! -e '$(ckpt_of unchanged)' ]"
fi

echo "ci_swap: case 4: gpu.ini with --accelerator auto"
run_cfg auto "$GPU_INI" --accelerator auto --set strategy.process_group_backend=gloo
trained auto
summary_of auto
if [ $GPU_USABLE = 1 ]; then
    check "auto: picked the gpu (a usable GPU is here)" contains "$IT_TMP/auto.out" "^lt: accelerator gpu"
else
    check "auto: picked the cpu (no usable GPU here)" contains "$IT_TMP/auto.out" "^lt: accelerator cpu (1 device)"
    cmp_with auto plain 0 max
fi

echo "ci_swap: sanity: the comparison notices another run (seed 43)"
run_cfg seed43 "$GPU_INI" "${SWAP[@]}" --seed 43
check "seed43: ltrun exits 0 ($RC)" [ "$RC" -eq 0 ]
ckpt_differ "$(ckpt_of seed43)" "$(ckpt_of plain)" 0 max "seed 43 is told from seed 42 (plain)"
it_finish
