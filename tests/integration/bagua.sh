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
#   e. resume: 1 + 1 epochs through --ckpt-path last equal 2 straight, bit
#      for bit (decentralized with all, gradient_allreduce, bytegrad).
#   f. bad input: an unknown algorithm, one this build lacks, shift_one on
#      an odd number of ranks, a communication_interval below 1.
#   h. bytegrad keeps a non-finite gradient non-finite: under 16-mixed, an
#      Inf injected on rank 0 makes both ranks skip the step; decentralized
#      (gradients never leave the rank) agrees on the skip the same way.
#   i. low_precision_decentralized on 4 ranks (a ring: two neighbours
#      each) trains, sends a quarter of decentralized's bytes, and differs
#      from ddp; resume restores rank 0's parameters and continues.
#   j. qadam: with warmup_steps past the end it is ddp with adamw (1e-5);
#      after warm-up (compressed momentum) 1 + 1 epochs through
#      --ckpt-path last equal 2 straight, bit for bit.
#   k. async: rank 1 sleeps 5 ms per step, yet the run finishes, averaging
#      rounds ran, and on_train_end stopped the thread within
#      2 x sync_interval_ms on both ranks; resume restores and continues;
#      killing a rank ends the job within 5 s, naming it.
# Accuracy after 3 epochs (bytegrad, low_precision_decentralized, async,
# qadam against ddp) is bagua_accuracy.sh's.
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

echo "bagua: e. resume, bit for bit: decentralized, gradient_allreduce, bytegrad"
for alg in decentralized gradient_allreduce bytegrad; do
    RES=(--strategy bagua --set strategy.algorithm=$alg --devices 2 --batch-size 32 "${SGD0[@]}"
         --set trainer.limit_train_batches=10 --set checkpoint.monitor=)
    run_ltrun $alg-straight "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --default-root-dir "$IT_TMP/$alg-straight"
    run_ltrun $alg-half1 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 1 --default-root-dir "$IT_TMP/$alg-halves"
    run_ltrun $alg-half2 "${BASE[@]}" "${SAME[@]}" "${RES[@]}" --max-epochs 2 --ckpt-path last --default-root-dir "$IT_TMP/$alg-halves"
    check "$alg: the resumed run exits 0" [ "$RC" -eq 0 ]
    ckpt_equal "$(ckpt_of $alg-straight)" "$(ckpt_of $alg-halves)" 0 both "$alg: 1 + 1 epochs equal 2 straight"
done

echo "bagua: h. bytegrad under 16-mixed: an Inf on rank 0 is skipped on both ranks"
train bg-inf --plugin-dir "$IT_PLUGINS" --set model.name=overflow_probe --set model.hidden=64 --set model.inject_steps=3 \
    --precision 16-mixed --strategy bagua --set strategy.algorithm=bytegrad --devices 2 --batch-size 32 --max-steps 8
for r in 0 1; do
    check "rank $r skipped step 3" grep -q "\[rank $r\] .*optimizer step skipped (Inf/NaN gradients, 1 so far)" "$IT_TMP/bg-inf.err"
done
train dec-inf --plugin-dir "$IT_PLUGINS" --set model.name=overflow_probe --set model.hidden=64 --set model.inject_steps=3 \
    --precision 16-mixed --strategy bagua --set strategy.algorithm=decentralized --devices 2 --batch-size 32 --max-steps 8
for r in 0 1; do
    check "decentralized: rank $r skipped step 3 (only rank 0 overflowed)" \
        grep -q "\[rank $r\] .*optimizer step skipped (Inf/NaN gradients, 1 so far)" "$IT_TMP/dec-inf.err"
done

echo "bagua: i. low_precision_decentralized, 4 ranks"
LPD=(--strategy bagua --set strategy.algorithm=low_precision_decentralized --batch-size 16 "${SGD0[@]}")
train ddp4-40 --strategy ddp --devices 4 --batch-size 16 --max-steps 40 "${SGD0[@]}"
train lpd "${LPD[@]}" --devices 4 --max-steps 40
check "lpd says what it sends" contains "$IT_TMP/lpd.err" \
    "algorithm low_precision_decentralized, ring, every 1 steps 55168 bytes (u8) sent to each of 2 neighbours"
ckpt_differ "$(ckpt_of lpd)" "$(ckpt_of ddp4-40)" 1e-4 norm "lpd is not ddp"
ckpt_equal "$(ckpt_of lpd)" "$(ckpt_of ddp4-40)" 0.05 norm "lpd stays near ddp after 40 steps"
L1=$(sed -n 's/.*train_loss \([0-9.]*\).*/\1/p' "$IT_TMP/lpd.out" | tail -n 1)
L4=$(sed -n 's/.*train_loss \([0-9.]*\).*/\1/p' "$IT_TMP/ddp4-40.out" | tail -n 1)
check "lpd trains as ddp does (train_loss ${L1:-?}, ddp ${L4:-?}: within 0.1)" \
    awk -v l="${L1:-9}" -v d="${L4:-0}" 'BEGIN { exit !(l - d < 0.1 && d - l < 0.1) }'
RESL=("${LPD[@]}" --devices 2 --set trainer.limit_train_batches=10 --set checkpoint.monitor= --default-root-dir "$IT_TMP/lpd-res")
run_ltrun lpd-1 "${BASE[@]}" "${SAME[@]}" "${RESL[@]}" --max-epochs 1
run_ltrun lpd-2 "${BASE[@]}" "${SAME[@]}" "${RESL[@]}" --max-epochs 2 --ckpt-path last
check "lpd: 1 epoch, then resumed to 2: both exit 0" [ "$RC" -eq 0 ]
check "lpd: the resumed run ends at step 20" grep -q "epoch 1 done: step 20," "$IT_TMP/lpd-2.out"

echo "bagua: j. qadam"
ADAM=(--set optimizer.name=adamw --set optimizer.lr=0.001)
train ddp-adam --strategy ddp --devices 2 --batch-size 32 --max-steps 20 "${ADAM[@]}"
train qadam-w --strategy bagua --set strategy.algorithm=qadam --devices 2 --batch-size 32 --max-steps 20 "${ADAM[@]}"
check "qadam says what it sends" contains "$IT_TMP/qadam-w.err" "algorithm qadam, after 100 warm-up steps 55168 bytes (u8) of momentum sent per step"
cmp_with qadam-w ddp-adam $TOL both
RESQ=(--strategy bagua --set strategy.algorithm=qadam --set strategy.warmup_steps=50 --devices 2 --batch-size 32 "${ADAM[@]}"
      --set trainer.limit_train_batches=60 --set checkpoint.monitor=)
run_ltrun q-straight "${BASE[@]}" "${SAME[@]}" "${RESQ[@]}" --max-epochs 2 --default-root-dir "$IT_TMP/q-straight"
run_ltrun q-half1 "${BASE[@]}" "${SAME[@]}" "${RESQ[@]}" --max-epochs 1 --default-root-dir "$IT_TMP/q-halves"
run_ltrun q-half2 "${BASE[@]}" "${SAME[@]}" "${RESQ[@]}" --max-epochs 2 --ckpt-path last --default-root-dir "$IT_TMP/q-halves"
check "qadam resume: all exit 0" [ "$RC" -eq 0 ]
ckpt_equal "$(ckpt_of q-straight)" "$(ckpt_of q-halves)" 0 both "qadam: 1 + 1 epochs equal 2 straight"
ckpt_differ "$(ckpt_of q-straight)" "$(ckpt_of ddp-adam)" 1e-4 norm "qadam after warm-up is not ddp"

echo "bagua: k. async, rank 1 sleeping 5 ms per step, sync_interval_ms 100"
ASYNC=(--strategy bagua --set strategy.algorithm=async --set strategy.sync_interval_ms=100 --devices 2 --batch-size 32)
train async --plugin-dir "$IT_PLUGINS" --set model.name=overflow_probe --set model.hidden=512 --set model.delay_ms=5 \
    "${ASYNC[@]}" --max-steps 600
for r in 0 1; do
    line=$(grep "\[rank $r\] .*bagua async: [0-9]* averaging rounds" "$IT_TMP/async.err" | tail -n 1)
    rounds=$(echo "$line" | sed -n 's/.*bagua async: \([0-9]*\) averaging rounds.*/\1/p')
    ms=$(echo "$line" | sed -n 's/.*stopped in \([0-9]*\) ms.*/\1/p')
    echo "  rank $r: ${rounds:-?} rounds, thread stopped in ${ms:-?} ms"
    check "async rank $r: rounds ran (${rounds:-none})" [ "${rounds:-0}" -ge 3 ]
    check "async rank $r: on_train_end within 2 x 100 ms (${ms:-?} ms)" [ "${ms:-999}" -le 200 ]
done
RESA=("${ASYNC[@]}" --set trainer.limit_train_batches=40 --set checkpoint.monitor= --default-root-dir "$IT_TMP/async-res")
run_ltrun async-1 "${BASE[@]}" "${SAME[@]}" "${RESA[@]}" --max-epochs 1
run_ltrun async-2 "${BASE[@]}" "${SAME[@]}" "${RESA[@]}" --max-epochs 2 --ckpt-path last
check "async: 1 epoch, then resumed to 2: both exit 0" [ "$RC" -eq 0 ]
check "async: the resumed run ends at step 80" grep -q "epoch 1 done: step 80," "$IT_TMP/async-2.out"
"$LTRUN" "${BASE[@]}" "${ASYNC[@]}" --max-epochs 50 --default-root-dir "$IT_TMP/async-kill" \
    >"$IT_TMP/async-kill.out" 2>"$IT_TMP/async-kill.err" &
LT=$!
IT_PIDS+=($LT)
for i in $(seq 1 300); do [ -d "$IT_TMP/async-kill/lt_logs" ] && break; sleep 0.1; done
sleep 1
R1=$(worker_with_rank $LT 1)
check "async: found rank 1 (pid ${R1:-none})" [ -n "$R1" ]
[ -n "$R1" ] && kill -9 "$R1"
wait_exit $LT 15000
echo "  killed rank 1: ltrun exited with $RC after $MS ms"
show_tail "$IT_TMP/async-kill.err" 3
check "async: the job ended within 5 s of the kill ($MS ms)" [ "$RC" -gt 0 -a "$MS" -le 5000 ]
check "async: the error names rank 1" grep -q "rank 1" "$IT_TMP/async-kill.err"

echo "bagua: f. bad input"
bad() { # bad LABEL "expected text" args...
    local label=$1 want=$2; shift 2
    run_ltrun "$label" "${BASE[@]}" --strategy bagua --devices 2 --max-steps 1 --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: exit non-zero" [ "$RC" -ne 0 ]
    check "$label: says '$want'" contains "$IT_TMP/$label.err" "$want"
}
bad unknown "strategy.algorithm = 'sgd' is not a Bagua algorithm; use gradient_allreduce, bytegrad, decentralized, low_precision_decentralized, async or qadam" --set strategy.algorithm=sgd
bad qadam-sgd "strategy.algorithm = qadam compresses Adam's momentum, so it needs optimizer.name = adamw, not sgd" --set strategy.algorithm=qadam
bad async-16 "strategy.algorithm = async with precision 16-mixed" --set strategy.algorithm=async --precision 16-mixed
bad qadam-w0 "strategy.warmup_steps = 0 with algorithm qadam: its variance is frozen" --set strategy.algorithm=qadam \
    --set strategy.warmup_steps=0 --set optimizer.name=adamw
bad sync0 "strategy.sync_interval_ms = 0: must be between 1 and 3600000" --set strategy.algorithm=async --set strategy.sync_interval_ms=0
bad hier "strategy.hierarchical = true applies to algorithm gradient_allreduce, not bytegrad" --set strategy.algorithm=bytegrad \
    --set strategy.hierarchical=true
bad odd "shift_one pairs ranks up, so it needs an even number of ranks, not 3" --devices 3 \
    --set strategy.algorithm=decentralized --set strategy.peer_selection_mode=shift_one
bad interval "strategy.communication_interval = 0: must be >= 1" --set strategy.algorithm=decentralized \
    --set strategy.communication_interval=0
it_finish
