#!/bin/bash
# Mixed and 16-bit precision (plugins/precision/mixed, .../true) end to end:
#   a. ddp on 2 ranks x 32 against one process x 64 in bf16-mixed and
#      16-mixed, 8 steps. The two differ by rounding only: ddp rounds each
#      rank's half-batch gradient to 16 bits and the average again, one
#      process rounds the whole-batch gradient once; with everything else
#      (activations, compute copy) rounded alike, the parameters after a few
#      steps agree to about the dtype's unit roundoff u relative to their
#      norm (measured: 3.4e-3 bf16, 2.4e-4 f16 on AMD EPYC). Held to 2u:
#      7.8e-3 for bf16 (u = 2^-8) and 9.8e-4 for f16 (u = 2^-11); a wrong
#      average or a lost reduction is off by tens of percent. 32-true stays
#      at 1e-5 (ddp_equivalence).
#      ddp sends the 16-bit gradients as they are: half the bytes of 32-true.
#   b. ddp over the shm backend (which sums 16-bit values in fp32), ddp_spawn,
#      dp (2 replicas in one process) and ddp2 (one node of 2 replicas) in
#      bf16-mixed against the same references.
#   c. overflow: overflow_probe poisons step 3 on rank 0 only. The step is
#      skipped on both ranks (each says so), the scale halves (65536 ->
#      32768, in the checkpoint's scaler state), training goes on to step 8,
#      and the result matches one process poisoned at the same step.
#   d. resume after a skipped step is bit-exact: 1 + 1 epochs through
#      --ckpt-path last equal 2 epochs straight, parameters, optimizer state
#      and scaler state alike.
#   e. an overflow at every step stops with an error after
#      precision.max_consecutive_skips skipped steps.
#   f. bad input: an unknown precision lists the valid ones; comm_hook=bf16
#      on 16-mixed's fp16 gradients is refused; comm_hook=fp16 there is a
#      no-op that says so; an accelerator whose gemm cannot run bf16 is
#      refused before training, naming the kernel.
#   g. 16-true and bf16-true train (finite loss, 16-bit checkpoints).
#   h. ddp keeps 16-mixed's gradients in shm's group memory, but not under a
#      precision plugin built for ABI 1.6, with the same result.
#   i. optimizer.fused = false (SGD in three passes: the master gradients'
#      cast, the step, the compute copy's cast) gives the one-pass kernel's
#      result bit for bit: bf16-mixed alone and over dp's replica threads,
#      16-mixed through a skipped step (1/scale != 1), and with gradient
#      clipping (the core casts the master gradients first, then one pass).
#      An unscale_and_check that writes the master gradients itself, as
#      plugins built before ABI 1.8 do, gives the same bits too; one that
#      defers under 32-true (no master gradients) or with grad_mul 0 is
#      refused with a message. A strategy's own optimizer_step that reads
#      the master gradients through a pointer kept from its first step gets
#      them written (against the built-in SGD without momentum), and one that
#      writes the parameters after lt_run_optimizer_step gets its compute
#      copy cast again (against optimizer.fused = false). A strategy built
#      for ABI 1.7 that reads master gradients kept since on_train_start in
#      after_optimizer_step finds each step's there (old_reader fails on
#      zeros or a repeat), with the default step's result; one built for
#      1.3 that writes the parameters in after_optimizer_step gets its
#      compute copy cast again (against optimizer.fused = false).
source "$(dirname "$0")/common.sh"
it_init precision "$@"
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1)
PROBE=(--plugin-dir "$IT_PLUGINS" --set model.name=overflow_probe)
ST="python3 $SRC/tests/integration/st_edit.py"
meta() { $ST meta "$1" "$2" 2>/dev/null; } # meta CKPT KEY
bytes_sent() { sed -n 's/.* \([0-9][0-9]*\) bytes (\([a-z0-9]*\)) sent per step.*/\1/p' "$IT_TMP/$1.out" "$IT_TMP/$1.err" | head -n 1; }

echo "precision: a. ddp 2 x 32 vs one process x 64, 8 steps"
for p in bf16-mixed 16-mixed; do
    tol=7.8e-3; [ $p = 16-mixed ] && tol=9.8e-4
    train ddp-$p --precision $p --strategy ddp --devices 2 --batch-size 32 --max-steps 8 --set trainer.log_level=debug
    train one-$p --precision $p --strategy single_device --batch-size 64 --max-steps 8
    cmp_with ddp-$p one-$p $tol norm
done
train ddp-32 --strategy ddp --devices 2 --batch-size 32 --max-steps 8 --set trainer.log_level=debug
B32=$(bytes_sent ddp-32) B16=$(bytes_sent ddp-bf16-mixed)
echo "  ddp gradient bytes per step: 32-true ${B32:-?}, bf16-mixed ${B16:-?}"
OK=0; [ -n "$B32" ] && [ -n "$B16" ] && [ $((2 * B16)) -eq "$B32" ] && OK=1
check "bf16-mixed sends half the bytes of 32-true" [ $OK = 1 ]

echo "precision: b. ddp over shm, ddp_spawn and dp in bf16-mixed"
train shm-bf16 --precision bf16-mixed --strategy ddp --devices 2 --batch-size 32 --max-steps 8 \
    --set strategy.process_group_backend=shm
cmp_with shm-bf16 one-bf16-mixed 7.8e-3 norm
train spawn-bf16 --precision bf16-mixed --strategy ddp_spawn --devices 2 --batch-size 32 --max-steps 8
cmp_with spawn-bf16 ddp-bf16-mixed 1e-7 norm
train dp-bf16 --precision bf16-mixed --strategy dp --devices 2 --batch-size 64 --max-steps 8
cmp_with dp-bf16 one-bf16-mixed 7.8e-3 norm
train ddp2-bf16 --precision bf16-mixed --strategy ddp2 --devices 2 --batch-size 64 --max-steps 8
cmp_with ddp2-bf16 one-bf16-mixed 7.8e-3 norm

echo "precision: c. an Inf gradient at step 3 on rank 0 under 16-mixed"
train inf-ddp "${PROBE[@]}" --precision 16-mixed --strategy ddp --devices 2 --batch-size 32 --max-steps 8 \
    --set model.hidden=64 --set model.inject_steps=3
for r in 0 1; do
    N=$(grep -c "\[rank $r\] .*optimizer step skipped (Inf/NaN gradients, 1 so far): loss scale 65536 -> 32768" "$IT_TMP/inf-ddp.out" "$IT_TMP/inf-ddp.err" | awk -F: '{ n += $2 } END { print n + 0 }')
    check "rank $r skipped the step once and halved the scale" [ "$N" -eq 1 ]
done
check "no other step was skipped" [ "$(cat "$IT_TMP/inf-ddp.out" "$IT_TMP/inf-ddp.err" | grep -c 'optimizer step skipped')" -eq 2 ]
STATE=$(meta "$(ckpt_of inf-ddp)" lt.precision_state)
echo "  scaler state: $STATE"
check "the checkpoint holds scale 2^15 and one skipped step" [ "$STATE" = "scale=0x1p+15 growth_tracker=4 skipped_in_row=0 skipped_total=1" ]
check "training went on to step 8" [ "$(meta "$(ckpt_of inf-ddp)" lt.global_step)" = 8 ]
train inf-one "${PROBE[@]}" --precision 16-mixed --strategy single_device --batch-size 64 --max-steps 8 \
    --set model.hidden=64 --set model.inject_steps=3
cmp_with inf-ddp inf-one 9.8e-4 norm
ckpt_differ "$(ckpt_of inf-one)" "$(ckpt_of one-16-mixed)" 1e-3 norm "the skipped step changed the result"

echo "precision: d. resume after a skipped step is bit-exact"
RES=("${PROBE[@]}" --precision 16-mixed --batch-size 64 --set model.hidden=64 --set model.inject_steps=3
     --set trainer.limit_train_batches=6 --set checkpoint.monitor=)
run_ltrun straight "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --default-root-dir "$IT_TMP/straight"
check "2 epochs straight exit 0" [ "$RC" -eq 0 ]
run_ltrun half1 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 1 --default-root-dir "$IT_TMP/halves"
run_ltrun half2 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --ckpt-path last --default-root-dir "$IT_TMP/halves"
check "1 + 1 epochs exit 0" [ "$RC" -eq 0 ]
ckpt_equal "$(ckpt_of straight)" "$(ckpt_of halves)" 0 both "resumed equals straight, bit for bit"
S1=$(meta "$(ckpt_of straight)" lt.precision_state) S2=$(meta "$(ckpt_of halves)" lt.precision_state)
echo "  scaler state straight: $S1; resumed: $S2"
OK=0; [ -n "$S1" ] && [ "$S1" = "$S2" ] && [ "${S1##* }" = skipped_total=1 ] && OK=1
check "the scaler state is the same, with the skipped step in it" [ $OK = 1 ]

echo "precision: e. Inf at every step stops training"
run_ltrun every "${BASE[@]}" "${SAME[@]}" "${PROBE[@]}" --precision 16-mixed --set model.hidden=64 \
    --set model.inject_every=true --set precision.max_consecutive_skips=5 --max-steps 50 --default-root-dir "$IT_TMP/every"
check "exits non-zero" [ "$RC" -ne 0 ]
check "says 5 steps in a row overflowed and what to do" contains "$IT_TMP/every.err" "5 optimizer steps in a row had Inf/NaN gradients.*max_consecutive_skips"

echo "precision: f. bad input"
run_ltrun badname "${BASE[@]}" --precision 8-mixed --max-steps 1 --default-root-dir "$IT_TMP/badname"
check "unknown precision: exit non-zero" [ "$RC" -ne 0 ]
check "unknown precision: lists the valid ones" contains "$IT_TMP/badname.err" "'8-mixed' (--precision) is not a precision: use 32-true, 64-true, 16-mixed, bf16-mixed, 16-true or bf16-true"
run_ltrun hookbf "${BASE[@]}" --precision 16-mixed --strategy ddp --devices 2 --set strategy.comm_hook=bf16 --max-steps 1 --default-root-dir "$IT_TMP/hookbf"
check "comm_hook=bf16 on fp16 gradients: refused" [ "$RC" -ne 0 ]
check "comm_hook=bf16 on fp16 gradients: says why" contains "$IT_TMP/hookbf.err" "comm_hook = bf16 with f16 gradients"
run_ltrun hookfp "${BASE[@]}" "${SAME[@]}" --precision 16-mixed --strategy ddp --devices 2 --set strategy.comm_hook=fp16 --max-steps 2 --default-root-dir "$IT_TMP/hookfp"
check "comm_hook=fp16 on fp16 gradients: runs" [ "$RC" -eq 0 ]
check "comm_hook=fp16 on fp16 gradients: says it sends them as they are" grep -q "gradients are f16 already" "$IT_TMP/hookfp.out" "$IT_TMP/hookfp.err"

run_ltrun nogemm "${BASE[@]}" --precision bf16-mixed --max-steps 1 --default-root-dir "$IT_TMP/nogemm" \
    --set "accelerator.get_kernels=$IT_PLUGINS/libhook_overrides.so:kernels_no_bf16_gemm"
check "an accelerator without bf16 gemm: refused before training" [ "$RC" -ne 0 ]
check "an accelerator without bf16 gemm: the gemm kernel is named" \
    contains "$IT_TMP/nogemm.err" "bf16-mixed needs accelerator 'cpu' to run the gemm kernel in bf16, which it cannot"

echo "precision: h. ddp's gradients in group memory under 16-mixed, and not under a precision plugin built for ABI 1.6"
# ddp-16-mixed (case a) ran over shm with its fp16 gradients in the group's
# memory, reduced in place. old16 is 16-mixed with a 1.6 header: it may
# hold the gradient pointer from its setup, so they must stay where they
# were; the reduction is the same, so the runs agree bit for bit.
check "ddp-16-mixed: gradients in the group's memory" grep -q "gradients in the group's memory" \
    "$IT_TMP/ddp-16-mixed.out" "$IT_TMP/ddp-16-mixed.err"
train old16 --plugin-dir "$IT_PLUGINS" --precision old16 --strategy ddp --devices 2 --batch-size 32 --max-steps 8 \
    --set trainer.log_level=debug
check "old16: gradients in the accelerator's memory" grep -q "gradients in the accelerator's memory" \
    "$IT_TMP/old16.out" "$IT_TMP/old16.err"
cmp_with old16 ddp-16-mixed 0 max

echo "precision: i. the one-pass optimizer step equals the three passes"
check "one-bf16-mixed: the log says the step is one pass" grep -q "optimizer step: one pass (sgd_step_mixed" \
    "$IT_TMP/one-bf16-mixed.out" "$IT_TMP/one-bf16-mixed.err"
train three-bf16 --precision bf16-mixed --strategy single_device --batch-size 64 --max-steps 8 --set optimizer.fused=false
check "three-bf16: the log says three passes and why" grep -q "optimizer step: three passes (optimizer.fused = false)" \
    "$IT_TMP/three-bf16.out" "$IT_TMP/three-bf16.err"
cmp_with three-bf16 one-bf16-mixed 0 max
train three-dp --precision bf16-mixed --strategy dp --devices 2 --batch-size 64 --max-steps 8 --set optimizer.fused=false
cmp_with three-dp dp-bf16 0 max
train three-inf "${PROBE[@]}" --precision 16-mixed --strategy single_device --batch-size 64 --max-steps 8 \
    --set model.hidden=64 --set model.inject_steps=3 --set optimizer.fused=false
cmp_with three-inf inf-one 0 max
for f in true false; do
    train clip-$f --precision 16-mixed --batch-size 64 --max-steps 8 --set trainer.gradient_clip_val=0.5 \
        --set optimizer.fused=$f
done
cmp_with clip-false clip-true 0 max
ckpt_differ "$(ckpt_of clip-true)" "$(ckpt_of one-16-mixed)" 1e-6 max "clipping at 0.5 changed the result"
HOOK="$IT_PLUGINS/libhook_overrides.so"
train own-unscale --precision bf16-mixed --strategy single_device --batch-size 64 --max-steps 8 \
    --set "precision.unscale_and_check=$HOOK:unscale_into_master"
cmp_with own-unscale one-bf16-mixed 0 max
NOMOM=(--precision bf16-mixed --strategy single_device --batch-size 64 --max-steps 8 --set optimizer.momentum=0)
train kept-grads "${NOMOM[@]}" --set "strategy.optimizer_step=$HOOK:step_kept_grads"
train sgd-nomom "${NOMOM[@]}"
cmp_with kept-grads sgd-nomom 1e-5 norm
for f in true false; do
    train shrink-$f --precision bf16-mixed --strategy single_device --batch-size 64 --max-steps 8 \
        --set "strategy.optimizer_step=$HOOK:step_then_shrink" --set optimizer.fused=$f
done
cmp_with shrink-true shrink-false 0 max
train old-reader --plugin-dir "$IT_PLUGINS" --strategy old_reader --precision bf16-mixed --batch-size 64 \
    --max-steps 8
check "old_reader (ABI 1.7): the kept master gradients held 8 steps' own" \
    [ "$(grep -c 'old_reader: step [0-9]*: sum of squares' "$IT_TMP/old-reader.out" "$IT_TMP/old-reader.err" |
         awk -F: '{ n += $NF } END { print n }')" = 8 ]
cmp_with old-reader one-bf16-mixed 0 max
for f in true false; do
    train old-shrink-$f --plugin-dir "$IT_PLUGINS" --strategy old_shrink --precision bf16-mixed \
        --batch-size 64 --max-steps 8 --set optimizer.fused=$f
done
cmp_with old-shrink-true old-shrink-false 0 max
ckpt_differ "$(ckpt_of old-shrink-true)" "$(ckpt_of one-bf16-mixed)" 1e-6 max \
    "old_shrink's after_optimizer_step changed the result"
run_ltrun defer32 "${BASE[@]}" --max-steps 1 --default-root-dir "$IT_TMP/defer32" \
    --set "precision.unscale_and_check=$HOOK:unscale_defer_one"
check "lt_run_defer_unscale under 32-true: exit non-zero" [ "$RC" -ne 0 ]
check "lt_run_defer_unscale under 32-true: says there are no master gradients" \
    contains "$IT_TMP/defer32.err" "lt_run_defer_unscale: there are no master gradients to defer"
run_ltrun defer0 "${BASE[@]}" --precision bf16-mixed --max-steps 1 --default-root-dir "$IT_TMP/defer0" \
    --set "precision.unscale_and_check=$HOOK:unscale_defer_zero"
check "lt_run_defer_unscale(run, 0): exit non-zero" [ "$RC" -ne 0 ]
check "lt_run_defer_unscale(run, 0): says grad_mul must be > 0" \
    contains "$IT_TMP/defer0.err" "grad_mul = 0; it must be finite and > 0"

echo "precision: g. 16-true and bf16-true train"
for p in 16-true bf16-true; do
    train $p --precision $p --batch-size 64 --max-steps 100
    LOSS=$(sed -n 's/.*train_loss \([0-9.e+-]*\).*/\1/p' "$IT_TMP/$p.out" | tail -n 1)
    check "$p: train_loss ${LOSS:-?} is finite and below 1.0" awk -v l="${LOSS:-nan}" 'BEGIN { exit !(l + 0 > 0 && l + 0 < 1.0) }'
    DT=F16; [ $p = bf16-true ] && DT=BF16
    check "$p: the checkpoint holds $DT parameters" grep -q "\"fc1.weight\":{\"dtype\":\"$DT\"" <(head -c 4096 "$(ckpt_of $p)")
done
it_finish
