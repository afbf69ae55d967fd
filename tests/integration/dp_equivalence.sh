#!/bin/bash
# dp (one process, each batch split over trainer.devices replicas on threads
# of their own, their gradients summed into the root's) must train the same
# model as single_device on the same batch: same seed, shuffled data, SGD lr
# 0.05 momentum 0.9, the parameters of the last checkpoints compared.
#   1. the MLP, 2 and 3 replicas, batch 64 and batch 7 (uneven slices 4 + 3
#      and 3 + 2 + 2), 20 steps
#   2. the CNN example (conv2d, max pooling), 10 steps
#   3. gradient accumulation 2, batch 64 and 7, 10 steps
#   4. training_step_end: replica_probe (tests/integration/replica_probe.c)
#      returns the logits from training_step and takes the loss over every
#      replica's logits gathered; it must train what fashion_mnist_mlp trains
#   5. strategy.replica_params=copied (copies refreshed after each update
#      instead of the root's buffer read in place)
#   6. dropout, drawn per row of the whole batch
#   7. validation and test metrics (val batch 101 split over the replicas)
#   8. resume mid-epoch from last.safetensors, bit for bit
#   9. refusals: a batch smaller than the replicas, dp on 2 nodes, replicas
#      that log different metrics or register different parameters
#  10. module collectives from the replicas (each replica a rank): reduce
#      (sum, max, avg), all_gather, broadcast, barrier give the closed-form
#      results under dp 2 and 3 and under ddp2 on one node (its process
#      group in the path)
# Tolerances as in ddp_equivalence.sh: the replicas add the same gradients in
# another order, so float32 is held to 1e-5 on the norm ratio and 1e-4
# elementwise, float64 (64-true) to 1e-10 on both, where a wrong slice, a
# wrong weight or a lost replica would show at once.
source "$(dirname "$0")/common.sh"
it_init dp_equivalence "$@"
for f in "$PLUGINS/liblt-strategy-dp.so" "$IT_PLUGINS/liblt-module-replica_probe.so"; do
    [ -e "$f" ] || { echo "dp_equivalence: FAIL: $f is missing (build it first)"; exit 1; }
done
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32
TOL64=1e-10   # both, float64
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1)
F64=(--precision 64-true)
SINGLE=(--strategy single_device --devices 1)
DP2=(--strategy dp --devices 2)
# More replicas than cores is refused unless they may share one (same
# result, slower); this machine may have 2.
DP3=(--strategy dp --devices 3 --set accelerator.share_cores=true)
PROBE=(--plugin-dir "$IT_PLUGINS" --model replica_probe)
dp_n() { if [ "$1" -eq 2 ]; then DPN=("${DP2[@]}"); else DPN=("${DP3[@]}"); fi; } # dp_n 2|3 -> DPN

echo "dp_equivalence: case 1: the MLP, dp 2 and 3 replicas vs single_device, batch 64 and 7, 20 steps"
for b in 64 7; do
    train single$b "${SINGLE[@]}" --batch-size $b --max-steps 20
    train single${b}f64 "${SINGLE[@]}" --batch-size $b --max-steps 20 "${F64[@]}"
    for n in 2 3; do
        dp_n $n
        train dp${n}x$b "${DPN[@]}" --batch-size $b --max-steps 20 --log-level debug
        compare dp${n}x$b single$b
        train dp${n}x${b}f64 "${DPN[@]}" --batch-size $b --max-steps 20 "${F64[@]}"
        cmp_with dp${n}x${b}f64 single${b}f64 $TOL64 both
    done
done
check "dp2x64 made 2 replicas sharing the root's parameters" \
    contains "$IT_TMP/dp2x64.err" "2 replicas on devices 0..1, parameters shared in place"
check "dp3x64 made 3 replicas" contains "$IT_TMP/dp3x64.err" "3 replicas on devices 0..2"
if [ "$(nproc)" -lt 3 ]; then
    check "dp3x64 warned that replicas share a core ($(nproc) cores)" \
        contains "$IT_TMP/dp3x64.err" "replica on device 2 shares cpu"
fi
check "dp2x64: one optimizer step per batch of 64 (effective batch 64, not 128)" \
    contains "$IT_TMP/dp2x64.out" "effective batch size 64 = 64 per process x 1 (dp)"

echo "dp_equivalence: case 2: the CNN (conv2d, max pooling), dp vs single_device, 10 steps"
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=4 --set model.hidden=16 --max-steps 10)
train cnnsingle64 "${CNN[@]}" "${SINGLE[@]}" --batch-size 64
train cnndp2x64 "${CNN[@]}" "${DP2[@]}" --batch-size 64
compare cnndp2x64 cnnsingle64
train cnnsingle64f64 "${CNN[@]}" "${SINGLE[@]}" --batch-size 64 "${F64[@]}"
train cnndp2x64f64 "${CNN[@]}" "${DP2[@]}" --batch-size 64 "${F64[@]}"
cmp_with cnndp2x64f64 cnnsingle64f64 $TOL64 both
train cnnsingle7f64 "${CNN[@]}" "${SINGLE[@]}" --batch-size 7 "${F64[@]}"
train cnndp3x7f64 "${CNN[@]}" "${DP3[@]}" --batch-size 7 "${F64[@]}"
cmp_with cnndp3x7f64 cnnsingle7f64 $TOL64 both

echo "dp_equivalence: case 3: accumulate 2 batches, dp vs single_device with the same accumulation, 10 steps"
ACC=(--accumulate-grad-batches 2 --max-steps 10)
train accsingle64 "${ACC[@]}" "${SINGLE[@]}" --batch-size 64
train accdp2x64 "${ACC[@]}" "${DP2[@]}" --batch-size 64
compare accdp2x64 accsingle64
for b in 64 7; do
    train accsingle${b}f64 "${ACC[@]}" "${SINGLE[@]}" --batch-size $b "${F64[@]}"
    train accdp2x${b}f64 "${ACC[@]}" "${DP2[@]}" --batch-size $b "${F64[@]}"
    cmp_with accdp2x${b}f64 accsingle${b}f64 $TOL64 both
done
train accdp3x7f64 "${ACC[@]}" "${DP3[@]}" --batch-size 7 "${F64[@]}"
cmp_with accdp3x7f64 accsingle7f64 $TOL64 both

echo "dp_equivalence: case 4: training_step_end (replica_probe): the loss over the gathered logits, 20 steps"
# dp's replicas == the probe on one device == fashion_mnist_mlp on one device
for b in 64 7; do
    train probesingle$b "${PROBE[@]}" "${SINGLE[@]}" --batch-size $b --max-steps 20
    compare probesingle$b single$b
    train probesingle${b}f64 "${PROBE[@]}" "${SINGLE[@]}" --batch-size $b --max-steps 20 "${F64[@]}"
    cmp_with probesingle${b}f64 single${b}f64 $TOL64 both
    for n in 2 3; do
        dp_n $n
        train probedp${n}x$b "${PROBE[@]}" "${DPN[@]}" --batch-size $b --max-steps 20
        compare probedp${n}x$b probesingle$b
        train probedp${n}x${b}f64 "${PROBE[@]}" "${DPN[@]}" --batch-size $b --max-steps 20 "${F64[@]}"
        cmp_with probedp${n}x${b}f64 probesingle${b}f64 $TOL64 both
        cmp_with probedp${n}x${b}f64 single${b}f64 $TOL64 both
    done
done
check "probedp2x64 logged train_loss from training_step_end" contains "$IT_TMP/probedp2x64.out" "train_loss"

echo "dp_equivalence: case 5: strategy.replica_params=copied vs single_device, 20 steps"
COPIED=(--set strategy.replica_params=copied --log-level debug --max-steps 20 "${F64[@]}")
train copieddp2x64f64 "${COPIED[@]}" "${DP2[@]}" --batch-size 64
check "copieddp2x64f64: the replicas hold copies" \
    contains "$IT_TMP/copieddp2x64f64.err" "2 replicas on devices 0..1, parameters copied"
cmp_with copieddp2x64f64 single64f64 $TOL64 both
train copieddp3x7f64 "${COPIED[@]}" "${DP3[@]}" --batch-size 7
cmp_with copieddp3x7f64 single7f64 $TOL64 both
# training_step_end's output gradient copied to each replica
train copiedprobedp2x7f64 "${COPIED[@]}" "${PROBE[@]}" "${DP2[@]}" --batch-size 7
cmp_with copiedprobedp2x7f64 single7f64 $TOL64 both

echo "dp_equivalence: case 6: dropout 0.3 (masks drawn per row of the whole batch), 20 steps"
DROP=(--set model.dropout=0.3 --max-steps 20 "${F64[@]}")
train dropsingle64f64 "${DROP[@]}" "${SINGLE[@]}" --batch-size 64
train dropdp2x64f64 "${DROP[@]}" "${DP2[@]}" --batch-size 64
cmp_with dropdp2x64f64 dropsingle64f64 $TOL64 both
train dropsingle7f64 "${DROP[@]}" "${SINGLE[@]}" --batch-size 7
train dropdp3x7f64 "${DROP[@]}" "${DP3[@]}" --batch-size 7
cmp_with dropdp3x7f64 dropsingle7f64 $TOL64 both
# the masks matter: without them the run is told apart
ckpt_differ "$(ckpt_of dropdp2x64f64)" "$(ckpt_of single64f64)" $TOL64 norm "dropout changed the run"

echo "dp_equivalence: case 7: validation and test metrics (val batch 101), dp vs single_device, 2 epochs"
# BASE without --no-test: the test stage runs too
EVAL=()
for a in "${BASE[@]}"; do [ "$a" = --no-test ] || EVAL+=("$a"); done
EVAL+=("${SAME[@]}" --max-epochs 2 --batch-size 64 --set trainer.limit_train_batches=20
       --set trainer.limit_test_batches=3 --set data.val_batch_size=101 "${F64[@]}")
results() { # results LABEL: the epoch and test lines without timings, and metrics.csv
    sed -n -E '/^epoch [0-9]+ done|test results/{s/, [0-9.]+ s, [0-9.]+ samples\/s//;p}' "$IT_TMP/$1.out"
    cat "$IT_TMP/$1/lt_logs/version_0/metrics.csv"
}
for s in single dp2 dp3; do
    case $s in single) st=("${SINGLE[@]}") ;; dp2) st=("${DP2[@]}") ;; dp3) st=("${DP3[@]}") ;; esac
    run_ltrun eval$s "${EVAL[@]}" "${st[@]}" --default-root-dir "$IT_TMP/eval$s"
    check "eval$s: ltrun exits 0" [ "$RC" -eq 0 ]
    results eval$s >"$IT_TMP/eval$s.results"
done
show_tail "$IT_TMP/evalsingle.results" 7
check "evalsingle: printed val_loss, val_acc, test_loss and test_acc" bash -c \
    "grep -q 'epoch 1 done.*val_loss.*val_acc' '$IT_TMP/evalsingle.results' && grep -q 'test_loss.*test_acc' '$IT_TMP/evalsingle.results'"
for s in dp2 dp3; do
    check "eval$s: the same epoch lines, test results and metrics.csv as single_device" \
        cmp -s "$IT_TMP/eval$s.results" "$IT_TMP/evalsingle.results"
done

echo "dp_equivalence: case 7b: AdamW, a cosine schedule with warm-up, clipping by norm and by value, lr_scaling"
# The optimizer step is split over the replicas' threads and clipping reads
# the summed gradients: each must still give one device's result.
OPT=(--set optimizer.name=adamw --set optimizer.lr=0.003 --set scheduler.name=cosine
     --set scheduler.warmup_steps=5 --max-steps 20 "${F64[@]}")
train adamsingle "${OPT[@]}" "${SINGLE[@]}" --batch-size 64 --set trainer.gradient_clip_val=0.5
train adamdp2 "${OPT[@]}" "${DP2[@]}" --batch-size 64 --set trainer.gradient_clip_val=0.5
cmp_with adamdp2 adamsingle $TOL64 both
train valclipsingle "${OPT[@]}" "${SINGLE[@]}" --batch-size 64 --set trainer.gradient_clip_val=0.01 \
    --set trainer.gradient_clip_algorithm=value
train valclipdp2 "${OPT[@]}" "${DP2[@]}" --batch-size 64 --set trainer.gradient_clip_val=0.01 \
    --set trainer.gradient_clip_algorithm=value
cmp_with valclipdp2 valclipsingle $TOL64 both
train lrsdp2 "${DP2[@]}" --batch-size 64 --max-steps 2 --set optimizer.lr_scaling=linear \
    --set optimizer.reference_batch_size=32
check "lrsdp2: dp's effective batch is the batch (64), so linear scaling from 32 doubles lr 0.05" \
    contains "$IT_TMP/lrsdp2.out" "effective batch size 64 = 64 per process x 1 (dp).*lr 0.1 (lr_scaling linear"

echo "dp_equivalence: case 8: dp 2 stopped at step 10 mid-epoch, resumed to step 20 == dp 2 straight to 20"
train resume10 "${DP2[@]}" --batch-size 64 --max-steps 10
run_ltrun resume20 "${BASE[@]}" "${SAME[@]}" "${DP2[@]}" --batch-size 64 --max-steps 20 \
    --ckpt-path "$(ckpt_of resume10)" --default-root-dir "$IT_TMP/resume20"
check "resume20: ltrun exits 0" [ "$RC" -eq 0 ]
check "resume20: resumed at step 10" contains "$IT_TMP/resume20.out" "resumed from .*step 10)"
ckpt_equal "$(ckpt_of resume20)" "$(ckpt_of dp2x64)" 0 max "resumed dp equals the straight run dp2x64 bit for bit"

echo "dp_equivalence: case 9: refusals (exit status, one line naming the problem)"
refused() { # refused LABEL STATUS NEEDLE args...: ltrun exits STATUS, its error line has NEEDLE
    local label=$1 want=$2 needle=$3; shift 3
    run_ltrun "$label" "${BASE[@]}" --max-steps 2 --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: exits $want ($RC)" [ "$RC" -eq "$want" ]
    check "$label: one error line" [ "$(grep -c 'error:' "$IT_TMP/$label.err")" -eq 1 ]
    check "$label: it says '$needle'" grep -q "error:.*$needle" "$IT_TMP/$label.err"
    grep -h "error:" "$IT_TMP/$label.err" | head -1 | sed 's/^/    /'
}
refused smallbatch 2 "batch_size = 1 .* on 2 replicas" "${DP2[@]}" --batch-size 1
check "smallbatch: refused before training" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/smallbatch.out'"
refused nodes 2 "use strategy ddp2" "${DP2[@]}" --num-nodes 2
refused unevenmetrics 2 "'replica_only'.*every replica must log the same metrics" \
    "${PROBE[@]}" --set model.probe=uneven_metrics "${DP2[@]}"
refused unevenparams 2 "fc1.weight.*same parameters on every replica" \
    "${PROBE[@]}" --set model.probe=uneven_params "${DP2[@]}"
# A replica that returns without the collective the root waits in must end
# the run, naming it, not hang it (timeout: a hang fails the check).
timeout 60 "$LTRUN" "${BASE[@]}" --max-steps 2 --default-root-dir "$IT_TMP/skipcoll" "${PROBE[@]}" \
    --set model.probe=skip_collective "${DP2[@]}" >"$IT_TMP/skipcoll.out" 2>"$IT_TMP/skipcoll.err"
RC=$?
check "skipcoll: ends with a refusal, no hang ($RC; 124 = hung)" [ "$RC" -eq 2 ]
check "skipcoll: names the replica that skipped the barrier" \
    grep -q "error:.*replica 1 returned from its step without calling lt_step_barrier" "$IT_TMP/skipcoll.err"

echo "dp_equivalence: case 10: module collectives across replicas (replica_probe, model.probe=collectives)"
COLL=("${PROBE[@]}" --set model.probe=collectives --batch-size 64 --max-steps 5 --set trainer.log_every_n_steps=1)
for cfg in "dp2:${DP2[*]}" "dp3:${DP3[*]}" "ddp2:--strategy ddp2 --devices 2"; do
    label=coll${cfg%%:*}
    read -r -a ARGS <<<"${cfg#*:}"
    train $label "${COLL[@]}" "${ARGS[@]}"
    world=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "coll_world") c = i } NR == 2 { print $c }' \
        "$IT_TMP/$label/lt_logs/version_0/metrics.csv")
    want=2; [ $label = colldp3 ] && want=3
    check "$label: the module saw a world of $want replicas (coll_world ${world:-none})" [ "${world:-0}" = "$want" ]
done

echo "dp_equivalence: sanity: the comparison notices a different run (seed 2)"
train other "${SINGLE[@]}" --batch-size 64 --max-steps 20 "${F64[@]}" --seed 2
ckpt_differ "$(ckpt_of other)" "$(ckpt_of single64f64)" $TOL norm "seed 2 (other) is told from seed 1 (single64f64)"
it_finish
