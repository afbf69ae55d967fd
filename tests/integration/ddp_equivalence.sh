#!/bin/bash
# ddp on 2 ranks must train the same model as one process with the combined
# batch: ddp 2 x 32 vs single_device 64 (20 steps), and with gradient
# accumulation ddp 2 x 16 x 2 vs single_device 64 (10 steps). Same seed,
# shuffled data, SGD lr 0.05 momentum 0.9; the parameters of the last
# checkpoints must agree to a relative difference of 1e-5. The same holds for
# the CNN example (case 4) and over the shm backend (case 3), with many small
# buckets (case 5), with the gradients in the shm group's memory or not
# (case 5b), with overlap off and on auto (case 6), and, to a looser tolerance,
# with gradients compressed to fp16 or bf16 on the wire (case 7).
#
# In float32 the two runs add the same gradients in a different order, so
# single weights near zero drift apart by rounding: the elementwise measure
# (|a-b| / max(|b|, 1e-3)) reaches ~1.3e-5 after 20 steps while the norm
# ratio ||a-b||/||b|| stays ~1e-7. So float32 runs are held to 1e-5 on the
# norm ratio and 1e-4 elementwise, and the same comparison in float64
# (64-true) to 1e-10 on both, where any real difference (a wrong shard, a
# wrong average, a missed reduction) would show at once.
source "$(dirname "$0")/common.sh"
it_init ddp_equivalence "$@"
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32
TOL64=1e-10   # both, float64
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1)

echo "ddp_equivalence: case 1: ddp 2 ranks x batch 32 vs single_device batch 64, 20 steps"
train ddp32 --strategy ddp --devices 2 --batch-size 32 --max-steps 20
train single64 --strategy single_device --devices 1 --batch-size 64 --max-steps 20
check "ddp32 ran 2 workers" contains "$IT_TMP/ddp32.out" "starting 2 workers"
compare ddp32 single64

echo "ddp_equivalence: case 1 in float64 (64-true): ddp 2 x 32 vs single_device 64, 20 steps"
train ddp32f64 --strategy ddp --devices 2 --batch-size 32 --max-steps 20 --precision 64-true
train single64f64 --strategy single_device --devices 1 --batch-size 64 --max-steps 20 --precision 64-true
cmp_with ddp32f64 single64f64 $TOL64 both

echo "ddp_equivalence: case 2: ddp 2 ranks x batch 16 x accumulate 2 vs single_device batch 64, 10 steps"
train ddp16x2 --strategy ddp --devices 2 --batch-size 16 --accumulate-grad-batches 2 --max-steps 10
train single64s10 --strategy single_device --devices 1 --batch-size 64 --max-steps 10
compare ddp16x2 single64s10
train ddp16x2f64 --strategy ddp --devices 2 --batch-size 16 --accumulate-grad-batches 2 --max-steps 10 --precision 64-true
train single64s10f64 --strategy single_device --devices 1 --batch-size 64 --max-steps 10 --precision 64-true
cmp_with ddp16x2f64 single64s10f64 $TOL64 both

echo "ddp_equivalence: case 3: the shm backend: ddp 2 x 32 (shared memory) vs single_device 64, 20 steps"
train ddp32shm --strategy ddp --devices 2 --batch-size 32 --max-steps 20 --set strategy.process_group_backend=shm
compare ddp32shm single64
train ddp32shmf64 --strategy ddp --devices 2 --batch-size 32 --max-steps 20 --precision 64-true --set strategy.process_group_backend=shm
cmp_with ddp32shmf64 single64f64 $TOL64 both

echo "ddp_equivalence: case 4: the CNN example (conv2d, max pooling): ddp 2 x 32 vs single_device 64, 10 steps"
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=4 --set model.hidden=16)
train cnnddp "${CNN[@]}" --strategy ddp --devices 2 --batch-size 32 --max-steps 10
train cnnsingle "${CNN[@]}" --strategy single_device --devices 1 --batch-size 64 --max-steps 10
compare cnnddp cnnsingle
train cnnddpf64 "${CNN[@]}" --strategy ddp --devices 2 --batch-size 32 --max-steps 10 --precision 64-true
train cnnsinglef64 "${CNN[@]}" --strategy single_device --devices 1 --batch-size 64 --max-steps 10 --precision 64-true
cmp_with cnnddpf64 cnnsinglef64 $TOL64 both

echo "ddp_equivalence: case 5: many buckets: ddp 2 x 32 with bucket_cap_mb 0.02, first_bucket_mb 0.005 vs single_device 64, 20 steps"
# 55050 parameters: 1310 + 11 x 5242 elements = 12 buckets in float32, 22 in float64
# (655 + 21 x 2621); each must be reduced exactly once, wherever it cuts a tensor.
# With 2 ranks every element is (a + b) / 2 whatever the buckets, so the result
# must equal case 1's ddp32 bit for bit, as well as single64 within TOL.
SMALL=(--set strategy.bucket_cap_mb=0.02 --set strategy.first_bucket_mb=0.005 --log-level debug)
train buckets "${SMALL[@]}" --set strategy.overlap=true --strategy ddp --devices 2 --batch-size 32 --max-steps 20
check "buckets: 12 buckets, overlap on" grep -q "55050 gradients in 12 buckets, hook allreduce, overlap on," \
    "$IT_TMP/buckets.out" "$IT_TMP/buckets.err"
compare buckets single64
cmp_with buckets ddp32 0 max
train bucketsf64 "${SMALL[@]}" --strategy ddp --devices 2 --batch-size 32 --max-steps 20 --precision 64-true
check "bucketsf64: 22 buckets" grep -q "55050 gradients in 22 buckets" "$IT_TMP/bucketsf64.out" "$IT_TMP/bucketsf64.err"
cmp_with bucketsf64 single64f64 $TOL64 both

echo "ddp_equivalence: case 5b: gradients in the shm group's memory (reduced in place) vs in the accelerator's (copied through the slots)"
# auto is shm on one host, whose group memory ddp takes by default
# (strategy.place_grads); both paths add in the same order, so the runs must
# agree bit for bit, with 2 ranks and with 3.
check "buckets: gradients in the group's memory" grep -q "gradients in the group's memory" \
    "$IT_TMP/buckets.out" "$IT_TMP/buckets.err"
train noplace "${SMALL[@]}" --set strategy.place_grads=false --strategy ddp --devices 2 --batch-size 32 --max-steps 20
check "noplace: gradients in the accelerator's memory" grep -q "gradients in the accelerator's memory" \
    "$IT_TMP/noplace.out" "$IT_TMP/noplace.err"
check "noplace: overlap on by auto (no shared-memory reduction)" grep -q "overlap on (auto)" \
    "$IT_TMP/noplace.out" "$IT_TMP/noplace.err"
cmp_with noplace buckets 0 max
train placed3 "${SMALL[@]}" --strategy ddp --devices 3 --batch-size 20 --max-steps 10
train noplace3 "${SMALL[@]}" --set strategy.place_grads=false --strategy ddp --devices 3 --batch-size 20 --max-steps 10
check "placed3: gradients in the group's memory" grep -q "gradients in the group's memory" \
    "$IT_TMP/placed3.out" "$IT_TMP/placed3.err"
cmp_with placed3 noplace3 0 max

echo "ddp_equivalence: case 6: overlap off (no: the config's boolean words; all 12 buckets reduced after backward) vs single_device 64, 20 steps"
train nooverlap "${SMALL[@]}" --set strategy.overlap=no --strategy ddp --devices 2 --batch-size 32 --max-steps 20
check "nooverlap: 12 buckets, overlap off" grep -q "in 12 buckets, hook allreduce, overlap off" \
    "$IT_TMP/nooverlap.out" "$IT_TMP/nooverlap.err"
compare nooverlap single64
cmp_with nooverlap ddp32 0 max
# overlap=auto (the default) turns it off where ltrun binds each rank to one
# core and shm reduces in the group's memory: with 2 ranks, below 4 cores.
train autoov "${SMALL[@]}" --strategy ddp --devices 2 --batch-size 32 --max-steps 20
if [ "$(nproc)" -lt 4 ]; then
    check "autoov ($(nproc) cores): overlap off, and why" grep -q "overlap off (auto: one core, shared-memory reduction)" \
        "$IT_TMP/autoov.out" "$IT_TMP/autoov.err"
else
    check "autoov ($(nproc) cores): overlap on" grep -q "overlap on (auto)" "$IT_TMP/autoov.out" "$IT_TMP/autoov.err"
fi
cmp_with autoov buckets 0 max
run_ltrun badov "${BASE[@]}" --strategy ddp --devices 2 --set strategy.overlap=sometimes --max-steps 1 \
    --default-root-dir "$IT_TMP/badov"
check "overlap=sometimes: refused, naming the values" contains "$IT_TMP/badov.err" "strategy.overlap = 'sometimes': use auto, true or false"

echo "ddp_equivalence: case 7: compression hooks (fp16, bf16 on the wire) vs single_device 64, 20 steps"
# Gradients rounded to 16 bits each step: measured norm ratios to single64 are
# 2.1e-4 (fp16) and 7.8e-3 (bf16); elementwise differences mean nothing here
# (up to 1.5 relative in weights near zero). The tolerances are ~10x and ~6x
# above. A gradient off by a factor 2 or 1/2 (a sum for an average, a double
# division) gives 0.42 and 0.18, the same as single64 at lr 0.1 or 0.025
# (SGD with momentum is linear in the gradient); the last check shows the bf16
# tolerance, the looser one, rejects both.
TOL_FP16=2e-3
TOL_BF16=5e-2
train hookfp16 --set strategy.comm_hook=fp16 --log-level debug --strategy ddp --devices 2 --batch-size 32 --max-steps 20
check "hookfp16: hook fp16" grep -q "hook fp16" "$IT_TMP/hookfp16.out" "$IT_TMP/hookfp16.err"
cmp_with hookfp16 single64 $TOL_FP16 norm
ckpt_differ "$(ckpt_of hookfp16)" "$(ckpt_of ddp32)" 0 max "hookfp16 differs from ddp32: the hook did round the gradients"
# The same over the shm backend, whose f16 sums go through binary32 too.
train hookfp16shm --set strategy.comm_hook=fp16 --set strategy.process_group_backend=shm --log-level debug \
    --strategy ddp --devices 2 --batch-size 32 --max-steps 20
cmp_with hookfp16shm single64 $TOL_FP16 norm
ckpt_differ "$(ckpt_of hookfp16shm)" "$(ckpt_of ddp32shm)" 0 max "hookfp16shm differs from ddp32shm: the hook did round the gradients"
# bf16 over the 12 small buckets: each bucket's wire buffer at its own offset
train hookbf16 --set strategy.comm_hook=bf16 "${SMALL[@]}" --strategy ddp --devices 2 --batch-size 32 --max-steps 20
check "hookbf16: 12 buckets, hook bf16" grep -q "in 12 buckets, hook bf16" "$IT_TMP/hookbf16.out" "$IT_TMP/hookbf16.err"
cmp_with hookbf16 single64 $TOL_BF16 norm
for lr in 0.1 0.025; do
    train "hookbf16lr$lr" --set strategy.comm_hook=bf16 "${SMALL[@]}" --strategy ddp --devices 2 --batch-size 32 \
        --max-steps 20 --set optimizer.lr=$lr
    ckpt_differ "$(ckpt_of hookbf16lr$lr)" "$(ckpt_of single64)" $TOL_BF16 norm \
        "bf16 at lr $lr (a gradient x$(awk -v l=$lr 'BEGIN { print l / 0.05 }')) is told from single64"
done

echo "ddp_equivalence: torchrun's flag names, the effective batch line and lr_scaling"
train aliases --strategy ddp --nproc-per-node 2 --nnodes 1 --batch-size 32 --max-steps 2 \
    --set optimizer.lr_scaling=linear --set optimizer.reference_batch_size=32
check "aliases: --nproc-per-node 2 started 2 workers" contains "$IT_TMP/aliases.out" "starting 2 workers"
check "aliases: effective batch 64 = 32 x 2 printed" contains "$IT_TMP/aliases.out" "effective batch size 64 = 32 per process x 2"
check "aliases: linear scaling doubles lr 0.05 to 0.1" contains "$IT_TMP/aliases.out" "lr 0.1 (lr_scaling linear"

echo "ddp_equivalence: sanity: the comparison notices a different run (seed 2)"
train other --strategy single_device --devices 1 --batch-size 64 --max-steps 20 --seed 2
ckpt_differ "$(ckpt_of other)" "$(ckpt_of single64)" $TOL norm "seed 2 (other) is told from seed 1 (single64)"
it_finish
