#!/bin/bash
# The bagua strategy (plugins/strategies/bagua) on 2 and 4 ranks against ddp:
#   a. gradient_allreduce is ddp: the same parameters after 20 steps, SGD
#      with momentum (float32: 1e-5, as ddp_equivalence).
#   b. decentralized, peers all, every step, plain SGD: averaging parameters
#      after identical-rate steps from the same point is averaging the
#      gradients, so it trains what ddp trains (1e-5).
#   c. communication_interval 5: the ranks drift apart between rounds, so
#      the result differs from ddp (over 1e-4) yet trains (loss falls).
#   d. shift_one on 4 ranks (one peer per round) converges: validation
#      accuracy after 2 epochs (lr annealed to zero, so the last epoch's
#      accuracy does not swing) within 1 point of ddp's on 4 ranks.
#   e. resume: 1 + 1 epochs through --ckpt-path last equal 2 straight
#      (decentralized, all, bit for bit).
#   f. bad input: an unknown algorithm, one this build lacks, shift_one on
#      an odd number of ranks, a communication_interval below 1.
#   g. bytegrad (8-bit gradients): the full MLP example for 3 epochs on 2
#      ranks (lr annealed to zero, as precision_accuracy) within 0.5 points
#      of ddp's test accuracy, sending at most 26% of ddp's gradient bytes
#      (one byte per element both ways, plus min/max per 4096).
#   h. bytegrad keeps a non-finite gradient non-finite: under 16-mixed, an
#      Inf injected on rank 0 makes both ranks skip the step.
source "$(dirname "$0")/common.sh"
it_init bagua "$@"
TOL=1e-5
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05 --max-epochs 1)
SGD0=(--set optimizer.momentum=0)

echo "bagua: a. gradient_allreduce vs ddp, 2 ranks x 32, 20 steps (momentum 0.9)"
train ddp-m --strategy ddp --devices 2 --batch-size 32 --max-steps 20 --set optimizer.momentum=0.9
train ga --strategy bagua --devices 2 --batch-size 32 --max-steps 20 --set optimizer.momentum=0.9
check "ga says which algorithm" contains "$IT_TMP/ga.err" "algorithm gradient_allreduce"
cmp_with ga ddp-m $TOL both

echo "bagua: b. decentralized (all, every step) vs ddp, plain SGD"
train ddp-0 --strategy ddp --devices 2 --batch-size 32 --max-steps 20 "${SGD0[@]}"
train dec --strategy bagua --set strategy.algorithm=decentralized --devices 2 --batch-size 32 --max-steps 20 "${SGD0[@]}"
check "dec says which algorithm" contains "$IT_TMP/dec.err" "algorithm decentralized, peers all, every 1 steps 220200 bytes (f32) sent"
cmp_with dec ddp-0 $TOL both

echo "bagua: c. decentralized, communication_interval 5"
train dec5 --strategy bagua --set strategy.algorithm=decentralized --set strategy.communication_interval=5 \
    --devices 2 --batch-size 32 --max-steps 20 "${SGD0[@]}"
ckpt_differ "$(ckpt_of dec5)" "$(ckpt_of ddp-0)" 1e-4 norm "interval 5 is not ddp"
L0=$(sed -n 's/.*train_loss \([0-9.]*\).*/\1/p' "$IT_TMP/dec5.out" | head -n 1)
check "dec5 trains (train_loss ${L0:-?} < 2.2)" awk -v l="${L0:-9}" 'BEGIN { exit !(l + 0 < 2.2) }'

echo "bagua: d. shift_one on 4 ranks vs ddp on 4 ranks, 2 epochs"
ACC=(--devices 4 --batch-size 16 --max-epochs 2 --set trainer.limit_val_batches=40 "${SGD0[@]}"
     --set scheduler.name=cosine --set scheduler.interval=step)
train ddp4 --strategy ddp "${ACC[@]}"
train s1 --strategy bagua --set strategy.algorithm=decentralized --set strategy.peer_selection_mode=shift_one "${ACC[@]}"
val() { sed -n 's/.*val_acc \([0-9.]*\).*/\1/p' "$IT_TMP/$1.out" | tail -n 1; }
A4=$(val ddp4) AS=$(val s1)
echo "  val_acc: ddp 4 ranks ${A4:-?}, shift_one ${AS:-?}"
check "shift_one within 1 point of ddp" awk -v a="${AS:-0}" -v b="${A4:-1}" 'BEGIN { d = a - b; exit !(a > 0 && d < 0.01 && d > -0.01) }'

echo "bagua: e. resume, decentralized"
RES=(--strategy bagua --set strategy.algorithm=decentralized --devices 2 --batch-size 32 "${SGD0[@]}"
     --set trainer.limit_train_batches=10 --set checkpoint.monitor=)
run_ltrun straight "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --default-root-dir "$IT_TMP/straight"
run_ltrun half1 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 1 --default-root-dir "$IT_TMP/halves"
run_ltrun half2 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --ckpt-path last --default-root-dir "$IT_TMP/halves"
check "both exit 0" [ "$RC" -eq 0 ]
ckpt_equal "$(ckpt_of straight)" "$(ckpt_of halves)" 0 both "1 + 1 epochs equal 2 straight"

echo "bagua: g. bytegrad: a quarter of the bytes, ddp's accuracy (MLP 784-512-512-10, 3 epochs, 2 ranks)"
FULL=(--plugin-dir "$PLUGINS" --config "$SRC/examples/fashion_mnist/train.ini" --devices 2 --batch-size 32
      --set trainer.enable_progress_bar=false --set trainer.num_sanity_val_steps=0 --set trainer.log_level=debug
      --set scheduler.name=cosine --set scheduler.interval=step)
run_ltrun full-ddp "${FULL[@]}" --strategy ddp --default-root-dir "$IT_TMP/full-ddp"
run_ltrun full-bg "${FULL[@]}" --strategy bagua --set strategy.algorithm=bytegrad --default-root-dir "$IT_TMP/full-bg"
check "both 3-epoch runs exit 0" [ "$RC" -eq 0 ]
test_acc() { sed -n 's/.*test results:.* test_acc \([0-9.][0-9.]*\).*/\1/p' "$IT_TMP/$1.out" | tail -n 1; }
TD=$(test_acc full-ddp) TB=$(test_acc full-bg)
echo "  test_acc: ddp ${TD:-?}, bytegrad ${TB:-?}"
check "bytegrad within 0.5 points of ddp" awk -v a="${TB:-0}" -v b="${TD:-1}" 'BEGIN { d = a - b; exit !(a > 0 && d <= 0.005 && d >= -0.005) }'
BD=$(sed -n 's/.* \([0-9][0-9]*\) bytes (f32) sent per step.*/\1/p' "$IT_TMP/full-ddp.err" | head -n 1)
BB=$(sed -n 's/.*algorithm bytegrad, \([0-9][0-9]*\) bytes (u8) sent per step.*/\1/p' "$IT_TMP/full-bg.err" | head -n 1)
echo "  bytes per step: ddp's gradients ${BD:-?}, bytegrad sends ${BB:-?}"
check "bytegrad sends at most 26% of ddp's gradient bytes" awk -v a="${BB:-1}" -v b="${BD:-0}" 'BEGIN { exit !(b > 0 && a <= 0.26 * b) }'
echo "bagua: h. bytegrad under 16-mixed: an Inf on rank 0 is skipped on both ranks"
train bg-inf --plugin-dir "$IT_PLUGINS" --set model.name=overflow_probe --set model.hidden=64 --set model.inject_steps=3 \
    --precision 16-mixed --strategy bagua --set strategy.algorithm=bytegrad --devices 2 --batch-size 32 --max-steps 8
for r in 0 1; do
    check "rank $r skipped step 3" grep -q "\[rank $r\] .*optimizer step skipped (Inf/NaN gradients, 1 so far)" "$IT_TMP/bg-inf.err"
done

echo "bagua: f. bad input"
bad() { # bad LABEL "expected text" args...
    local label=$1 want=$2; shift 2
    run_ltrun "$label" "${BASE[@]}" --strategy bagua --devices 2 --max-steps 1 --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: exit non-zero" [ "$RC" -ne 0 ]
    check "$label: says '$want'" contains "$IT_TMP/$label.err" "$want"
}
bad unknown "strategy.algorithm = 'sgd': not a Bagua algorithm; use gradient_allreduce, bytegrad or decentralized" --set strategy.algorithm=sgd
bad later "strategy.algorithm = 'qadam': Bagua has it, but this build of the bagua strategy does not yet" --set strategy.algorithm=qadam
bad odd "shift_one pairs ranks up, so it needs an even number of ranks, not 3" --devices 3 \
    --set strategy.algorithm=decentralized --set strategy.peer_selection_mode=shift_one
bad interval "strategy.communication_interval = 0: must be >= 1" --set strategy.algorithm=decentralized \
    --set strategy.communication_interval=0
it_finish
