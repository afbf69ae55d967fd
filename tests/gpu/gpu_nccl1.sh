#!/bin/bash
# (d) The nccl backend with world size 1: --devices 1 --strategy ddp --set
# strategy.process_group_backend=nccl starts one worker whose gradients go
# through NCCL's allreduce (of one rank: the identity, then the average over
# 1) in buckets, overlapping backward. It must train what single_device
# trains on the same GPU (MLP and CNN, 20 steps, seed 1, batch 64). With one
# rank the sum has one term, so the result should be identical; the test
# holds it to the ddp tolerances (1e-5 norm ratio, 1e-4 elementwise) and
# shows the measured difference. A bucket never reduced, reduced twice,
# or read before NCCL's stream finished would be far outside.
# Also: the "auto" backend on the gpu is nccl (the summary line).
source "$(dirname "$0")/lib.sh"
gpu_init gpu_nccl1 "$@"
if [ "$NCCL" = nccl ] && [ ! -e "$PLUGINS/liblt-backend-nccl.so" ]; then
    echo "gpu_nccl1: FAIL: $PLUGINS/liblt-backend-nccl.so was not built (configure with -DLT_WITH_NCCL=ON)"
    exit 1
fi
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32, the MLP
TOL_MAX_CNN=1e-3  # elementwise, float32, the CNN (see cnn_compare)
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --set model.dropout=0 --max-epochs 1 --max-steps 20
      --accelerator "$GPU" --devices 1 --batch-size 64)
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=8 --set model.hidden=32)

echo "gpu_nccl1: case 1: MLP, ddp world size 1 over nccl vs single_device, 20 steps"
train nccl1 --strategy ddp --set strategy.process_group_backend="$NCCL" --log-level debug
summary_has nccl1 "^lt: accelerator $GPU \(1 device\), strategy ddp, .*backend $NCCL"
check "nccl1: ltrun started 1 worker" contains "$IT_TMP/nccl1.out" "starting 1 worker"
grep -h -m1 'gradients in [0-9]* buckets' "$IT_TMP/nccl1.out" "$IT_TMP/nccl1.err" | sed 's/^/    /'
train single --strategy single_device
compare nccl1 single

echo "gpu_nccl1: case 2: the CNN, the same comparison"
train cnnnccl1 "${CNN[@]}" --strategy ddp --set strategy.process_group_backend="$NCCL"
train cnnsingle "${CNN[@]}" --strategy single_device
cnn_compare cnnnccl1 cnnsingle

echo "gpu_nccl1: case 3: strategy.process_group_backend=auto picks $NCCL on the $GPU"
if [ "$GPU" = gpu ]; then
    train auto --strategy ddp --max-steps 2
    summary_has auto "^lt: accelerator gpu \(1 device\), strategy ddp, .*backend nccl"
else
    echo "  not run: dry run on the cpu (auto picks shm there)"
fi

echo "gpu_nccl1: sanity: the comparison tells seed 2 from seed 1"
train other --strategy ddp --set strategy.process_group_backend="$NCCL" --seed 2
ckpt_differ "$(ckpt_of other)" "$(ckpt_of single)" $TOL norm "seed 2 (nccl) is told from seed 1 (single_device)"
it_finish
